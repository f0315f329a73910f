"""The multi-turn driver: many episodes at once, over local environments or an ``EnvPool`` of servers.

``plan_episodes`` fixes which episodes a run holds (task, seed, group, member) before anything runs,
with ids that are the same in every run, so a run can be resumed and a group of G rollouts always
starts from the same task and seed. ``run_rollouts`` plays them in a thread pool (the concurrency
limit), reusing environments (local instances or server sessions) across episodes, and writes one
``EpisodeRecord`` per episode as it finishes. A policy that answers at once (scripted) on servers is
played in rounds instead: one batch step per server for all ready episodes (``agentenvs.rollout.rounds``).

Failures are labelled, never hidden: an exception from the environment or its server gives
``failure_cause`` ``infra``; running past the episode's time limit gives ``timeout``; a model that
cannot answer gives ``policy``. The time limit is checked before every turn and bounds every model
request; a local environment stuck inside one ``step`` cannot be interrupted in-process (servers have
their own per-step limit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.errors import AgentEnvsError, InvalidArgument
from agentenvs.registry import env_class
from agentenvs.registry import make as make_local
from agentenvs.rollout.episode import EpisodeTimeout, panel_hash, rollout_episode
from agentenvs.rollout.policy import Policy
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.rollout.rounds import can_play_in_rounds, play_in_rounds
from agentenvs.rollout.store import EPISODES_FILE, EpisodeStore
from agentenvs.seeding import derive_seed, rng_for

__all__ = ["EpisodeSpec", "EpisodeTimeout", "RolloutConfig", "plan_episodes", "rollout_episode", "run_rollouts"]


@dataclass(frozen=True)
class EpisodeSpec:
    """One planned episode."""

    task_id: str | None
    """None: the environment picks the task from the seed."""
    split: str
    seed: int
    group_id: str
    episode_id: str
    member: int


SCHEDULES = ("auto", "threads", "rounds")


@dataclass
class RolloutConfig:
    """How episodes are run."""

    concurrency: int = 8
    time_limit_s: float | None = None
    """Wall-clock limit of one episode (reset, every turn, every model request)."""
    max_turns: int | None = None
    """Cap on turns per episode, passed to the environment (None: the environment's own limit)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    schedule: str = "auto"
    """``threads`` (an episode per thread), ``rounds`` (one batch step per server for all ready episodes;
    needs servers), or ``auto``: rounds for a policy that answers at once (``Policy.blocking`` False) on
    servers, threads otherwise."""

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise InvalidArgument(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")


def task_ids(env_name: str, split: str, env: Any = None) -> list[str] | None:
    """The task ids of a split: from a local environment, else from the installed frozen panel, else
    from the environment's class (its ``tasks`` without running its constructor); None when unknown."""
    if env is not None and hasattr(env, "tasks"):
        return [t["task_id"] for t in env.tasks(split)]
    try:
        return [t["task_id"] for t in panels.load_panel(env_name, split)]
    except AgentEnvsError:
        pass
    try:
        cls = env_class(env_name)
        return [t["task_id"] for t in cls.__new__(cls).tasks(split)]
    except Exception:  # the class is not importable here or needs its constructor: the env picks by seed
        return None


def plan_episodes(
    env_name: str,
    split: str,
    n: int,
    group_size: int = 1,
    *,
    seed: int = 0,
    tasks: Sequence[str] | None = None,
    shuffle: bool = False,
) -> list[EpisodeSpec]:
    """``n`` groups of ``group_size`` episodes: the tasks in panel order (or shuffled by ``seed``), cycled."""
    if n < 1 or group_size < 1:
        raise InvalidArgument(f"n and group_size must be at least 1, got n={n}, group_size={group_size}")
    order: list[str | None] = list(tasks) if tasks else [None]
    if shuffle and len(order) > 1:
        order = [order[i] for i in rng_for("rollout-plan", seed).permutation(len(order))]
    specs = []
    for index in range(n):
        task_id = order[index % len(order)]
        episode_seed = derive_seed("rollout", seed, index) % (2**31)
        group_id = f"{env_name}/{split}/{task_id or 'any'}/{episode_seed}"
        for member in range(group_size):
            specs.append(EpisodeSpec(task_id, split, episode_seed, group_id, f"{group_id}/{member}", member))
    return specs


class EnvSource:
    """Hands out environments (local instances or server sessions) and takes them back for reuse."""

    def __init__(self, env_name: str, servers: Any, kwargs: dict[str, Any]):
        self.env_name = env_name
        self.servers = servers
        self.kwargs = kwargs
        self.idle: list[Any] = []
        self.lock = threading.Lock()

    def take(self) -> Any:
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return self._make()

    def take_many(self, count: int) -> list[Any]:
        """``count`` environments, or the error of one that could not be made in its place. New sessions
        are opened ``OPEN_CLOSE_THREADS`` at a time (a rollout's first wave opens one per episode)."""
        with self.lock:
            reused = [self.idle.pop() for _ in range(min(count, len(self.idle)))]
        return reused + _each(lambda _: self._make(), [None] * (count - len(reused)))

    def _make(self) -> Any:
        if self.servers is None:
            return make_local(self.env_name, **self.kwargs)
        return self.servers.make(self.env_name, **self.kwargs)

    def give_back(self, env: Any) -> None:
        with self.lock:
            self.idle.append(env)

    def discard(self, env: Any) -> None:
        try:
            env.close()
        except Exception:  # a broken env or a dead server: nothing more to release
            return

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        _each(self.discard, idle)


OPEN_CLOSE_THREADS = 8
"""Sessions opened or closed at once. Each is a round-trip that costs the server little, so a run's first
wave and its end need not queue a hundred of them one after the other."""


def _each(call: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``call`` on every item, ``OPEN_CLOSE_THREADS`` at a time; an exception is returned in its item's place."""

    def guarded(item: Any) -> Any:
        try:
            return call(item)
        except Exception as exc:
            return exc

    if len(items) <= 1:
        return [guarded(item) for item in items]
    with ThreadPoolExecutor(min(OPEN_CLOSE_THREADS, len(items)), thread_name_prefix="rollout-sessions") as pool:
        return list(pool.map(guarded, items))


def _as_pool(servers: Any) -> tuple[Any, bool]:
    """An EnvPool for a list of URLs (owned, closed by the driver) or the caller's pool as it is."""
    if servers is None or hasattr(servers, "make"):
        return servers, False
    urls = [servers] if isinstance(servers, str) else list(servers)
    from agentenvs.client import EnvPool

    return EnvPool(urls), True


def run_rollouts(
    env: str,
    policy: Policy,
    *,
    n: int | None = None,
    group_size: int = 1,
    split: str | None = None,
    seed: int = 0,
    episodes: Sequence[EpisodeSpec] | None = None,
    servers: Any = None,
    config: RolloutConfig | None = None,
    out: str | Path | None = None,
    resume: bool = True,
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play episodes of ``env`` with ``policy`` and return their records in plan order.

    Either ``episodes`` (from :func:`plan_episodes`) or ``n`` groups of ``group_size``. ``servers``:
    None (in-process), an ``EnvPool`` / ``connect(url)`` client, or server URLs. ``out``: a folder that
    gets ``episodes.jsonl``; with ``resume``, episodes already in it are not run again.
    """
    config = config or RolloutConfig()
    pool, owned = _as_pool(servers)
    kwargs = dict(config.env_kwargs)
    if policy.needs_privileged:
        kwargs["privileged"] = True
    if config.max_turns is not None:
        kwargs["max_turns"] = config.max_turns
    source = EnvSource(env, pool, kwargs)
    store = None if out is None else EpisodeStore(Path(out) / EPISODES_FILE)
    try:
        first = source.take()
        description = first.describe()
        split = split or description.get("default_split") or "test"
        if episodes is None:
            if n is None:
                raise InvalidArgument("give run_rollouts either episodes=plan_episodes(...) or n (number of groups)")
            local = first if pool is None else None
            episodes = plan_episodes(env, split, n, group_size, seed=seed, tasks=task_ids(env, split, local))
        source.give_back(first)
        identity = _identity(env, description)
        done = _resumed(store, resume, identity, policy) if store is not None else {}
        todo = [spec for spec in episodes if spec.episode_id not in done]
        results = dict(done)
        for record in _run_all(todo, policy, source, description, identity, config):
            results[record.episode_id] = record
            if store is not None:
                store.add(record)
            if on_record is not None:
                on_record(record)
        return [results[spec.episode_id] for spec in episodes if spec.episode_id in results]
    finally:
        if store is not None:
            store.close()
        source.close()
        if owned:
            pool.close()


def _identity(env: str, description: dict[str, Any]) -> dict[str, Any]:
    return {"env": env, "env_version": str(description.get("version", ""))}


def _resumed(store: EpisodeStore, resume: bool, identity: dict[str, Any], policy: Policy) -> dict[str, EpisodeRecord]:
    """The episodes a run keeps from its file: none without ``resume`` (the file is emptied, never
    mixed); with it, every stored one, which must come from the same environment version, panel and
    policy (docs/rollout.md, "The driver")."""
    if not resume:
        store.rewrite([])
        return {}
    done = store.finished()
    panels_now = {split: panel_hash(identity["env"], split) for split in {r.split for r in done.values()}}
    for record in done.values():
        stored = (record.env_version, record.panel_hash, _policy_model(record.policy))
        current = (identity["env_version"], panels_now[record.split], _policy_model(policy.describe()))
        if stored != current:
            raise InvalidArgument(
                f"{store.path} holds episodes of another run (env version, panel hash, policy: {stored}; now "
                f"{current}); its episodes would mix with this run's, so give a new --out folder, or --no-resume "
                "to start the file over"
            )
    return done


def _policy_model(described: dict[str, Any]) -> dict[str, Any]:
    """What of a policy's ``describe()`` must match to resume: its name, model and seed."""
    return {key: described.get(key) for key in ("name", "model", "seed")}


def _run_all(todo, policy, source, description, identity, config):
    """Yield records as episodes finish: in rounds of batch steps when the policy answers at once and
    the servers take batches (``agentenvs.rollout.rounds``), else a thread per episode."""
    progress = None
    if config.progress and todo:
        from tqdm import tqdm

        progress = tqdm(total=len(todo), desc=f"rollout {identity['env']}", unit="ep", dynamic_ncols=True)
    successes = 0
    if config.schedule == "rounds" or (config.schedule == "auto" and can_play_in_rounds(policy, source.servers)):
        records = play_in_rounds(todo, policy, source, description, identity, config)
    else:
        records = _play_in_threads(todo, policy, source, description, identity, config)
    try:
        for record in records:
            successes += record.success
            if progress is not None:
                progress.update(1)
                progress.set_postfix(success=f"{successes / progress.n:.2f}")
            yield record
    finally:
        if progress is not None:
            progress.close()


def _play_in_threads(todo, policy, source, description, identity, config):
    """A thread per episode (``config.concurrency`` at once): for policies that wait on a model."""
    with ThreadPoolExecutor(max_workers=max(1, config.concurrency), thread_name_prefix="rollout") as pool:
        futures = [pool.submit(rollout_episode, source, policy, spec, description, identity, config) for spec in todo]
        for future in as_completed(futures):
            yield future.result()

"""The eval runner: k samples of every task of a panel, resumable, scored into a results file.

A run lives in one folder: ``run.json`` (its identity, checked on resume), ``episodes.jsonl`` (the
``EpisodeStore``: one record per finished episode, appended durably) and ``results.json``. Running the
same command again continues where an interrupted run stopped: finished (task, sample) pairs are
skipped. The identity holds the settings and what the settings do not pin down (the environment's
version, the panel's checksum, the model's identity), so an upgrade never resumes old episodes into
new scores (docs/evaluation.md, "Resuming").
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.results import make_results, policy_label, write_results
from agentenvs.evaluation.scoring import group_runs, load_records, score_records
from agentenvs.rollout.store import EpisodeStore
from agentenvs.seeding import derive_seed

EPISODES = "episodes.jsonl"
RUN = "run.json"
RESULTS = "results.json"


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate; everything but ``servers`` and ``concurrency`` must match to resume a run."""

    env: str
    policy: str = "smollm2"
    split: str | None = None
    k: int = 4
    limit: int | None = None
    servers: Sequence[str] = field(default_factory=tuple)
    max_turns: int | None = None
    concurrency: int = 4
    seed: int = 0
    time_limit_s: float | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    """Keywords of ``make_policy``: temperature, top_p, max_tokens, stop, history, mode, tokenizer."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor keywords of the environment (ScienceWorld's ``admissible_actions``, ...)."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise InvalidArgument(f"--k must be at least 1 (samples per task), got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise InvalidArgument(f"--limit must be a positive number of tasks, got {self.limit}")
        if self.concurrency < 1:
            raise InvalidArgument(f"--concurrency must be at least 1, got {self.concurrency}")

    def identity(self, split: str, model: dict[str, Any]) -> dict[str, Any]:
        """What defines the run: a resumed run must have the same (``model``: the policy's ``identity()``)."""
        import agentenvs

        return {
            "env": self.env,
            "env_version": str(agentenvs.env_class(self.env).version),
            "split": split,
            "panel_hash": panels.panel_hash(self.env, split),
            "policy": self.policy,
            "model": model,
            "k": self.k,
            "limit": self.limit,
            "max_turns": self.max_turns,
            "seed": self.seed,
            "sampling": dict(sorted(self.sampling.items())),
            "env_kwargs": dict(sorted(self.env_kwargs.items())),
        }


class RunMismatch(InvalidArgument):
    """The run folder holds a run with another identity (other settings, env version, panel or model)."""

    code = "run_mismatch"


def select_tasks(tasks: Sequence[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` tasks taken round-robin over task types in panel order (all when no limit)."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    queues: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        queues.setdefault(str(task.get("task_type") or ""), []).append(task)
    chosen: list[dict[str, Any]] = []
    while len(chosen) < limit:
        for queue in queues.values():
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    order = {task["task_id"]: index for index, task in enumerate(tasks)}
    return sorted(chosen, key=lambda task: order[task["task_id"]])


def run_id(config: EvalConfig, split: str, policy: dict[str, Any]) -> str:
    """A stable readable name of the run: ``ENV-SPLIT-POLICY-kK[-nN]``."""
    label = policy_label(policy).split("://")[-1]
    raw = f"{config.env}-{split}-{label}-k{config.k}" + (f"-n{config.limit}" if config.limit else "")
    return "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in raw).strip("-")


def open_run(folder: Path, identity: dict[str, Any], *, fresh_on_mismatch: bool = False) -> dict[str, Any]:
    """The run state in ``folder`` (written when new); a folder of another run is an error, or with
    ``fresh_on_mismatch`` is emptied so the run starts over (its old episodes never mix in)."""
    path = folder / RUN
    if path.is_file():
        stored = json.loads(path.read_text(encoding="utf-8"))
        old = stored.get("identity", {})
        if old == identity:
            return stored
        differing = sorted(k for k in identity.keys() | old.keys() if old.get(k) != identity.get(k))
        if not fresh_on_mismatch:
            raise RunMismatch(
                f"{folder} holds another run (it differs in {', '.join(differing)}); its episodes would mix with "
                "this run's, so give a new --out folder, or delete this one to start over"
            )
        print(f"{folder} held another run (it differs in {', '.join(differing)}); starting it over")
        shutil.rmtree(folder)
    stored = {"identity": identity, "elapsed_s": 0.0, "sessions": 0}
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return stored


def episode_spec(config: EvalConfig, split: str, task_id: str, member: int) -> Any:
    """Sample ``member`` of a task: every sample starts from the same environment seed, and the
    policy's sampling seed (derived by the driver from the episode id) differs between samples."""
    from agentenvs.rollout.driver import EpisodeSpec

    seed = derive_seed("eval", config.seed, config.env, split, task_id) % (2**31)
    group_id = f"{config.env}/{split}/{task_id}/{seed}"
    return EpisodeSpec(task_id, split, seed, group_id, f"{group_id}/{member}", member)


def pair_of(record: dict[str, Any]) -> tuple[str, int]:
    """The (task, sample) pair a record holds, read from its episode id (``.../MEMBER``)."""
    member = str(record.get("episode_id", "")).rsplit("/", 1)[-1]
    return str(record["task_id"]), int(member) if member.isdigit() else -1


def _play(config: EvalConfig, specs: list[Any], policy: Any, sink: Any, progress: bool) -> None:
    """Play the episodes with the rollout driver; each record goes to ``sink`` as it finishes."""
    from agentenvs.rollout.driver import RolloutConfig, run_rollouts

    rollout = RolloutConfig(
        concurrency=config.concurrency,
        time_limit_s=config.time_limit_s,
        max_turns=config.max_turns,
        env_kwargs=dict(config.env_kwargs),
        progress=progress,
    )
    run_rollouts(
        config.env,
        policy,
        episodes=specs,
        servers=list(config.servers) or None,
        config=rollout,
        on_record=sink,
    )


def evaluate(
    config: EvalConfig,
    out: str | Path,
    *,
    progress: bool = True,
    resamples: int = 2000,
    fresh_on_mismatch: bool = False,
) -> Path:
    """Run (or resume) an evaluation into ``out`` and return the path of its ``results.json``.

    A folder that holds a run of another identity is an error (:class:`RunMismatch`), or with
    ``fresh_on_mismatch`` (the demo's cache) is started over.
    """
    import agentenvs
    from agentenvs.rollout.factory import make_policy

    started = time.monotonic()
    folder = Path(out)
    description = agentenvs.describe(config.env)
    split = config.split or description["default_split"]
    if split not in description["splits"]:
        raise InvalidArgument(f"{config.env} has no split {split!r}; its splits are {sorted(description['splits'])}")
    tasks = select_tasks(panels.load_panel(config.env, split), config.limit)
    with make_policy(config.policy, seed=config.seed, **config.sampling) as policy:
        identity = config.identity(split, policy.identity())
        state = open_run(folder, identity, fresh_on_mismatch=fresh_on_mismatch)
        with EpisodeStore(folder / EPISODES) as store:
            wanted = {(task["task_id"], member) for task in tasks for member in range(config.k)}
            done = {pair_of(record) for record in store.rows()} & wanted
            todo = [
                episode_spec(config, split, task["task_id"], member)
                for task in tasks
                for member in range(config.k)
                if (task["task_id"], member) not in done
            ]
            if done:
                print(f"resuming {folder}: {len(done)} of {len(wanted)} episodes already finished")
            if todo:
                _play(config, todo, policy, store.add, progress)
            records = _records_for(store.rows(), wanted)
    elapsed = float(state.get("elapsed_s", 0.0)) + time.monotonic() - started
    state.update(elapsed_s=round(elapsed, 2), sessions=int(state.get("sessions", 0)) + 1)
    (folder / RUN).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return _write_run_results(config, folder, description, split, tasks, records, elapsed, resamples)


def _write_run_results(
    config: EvalConfig,
    folder: Path,
    description: dict[str, Any],
    split: str,
    tasks: list[dict[str, Any]],
    records: list[dict[str, Any]],
    elapsed: float,
    resamples: int,
) -> Path:
    max_turns = config.max_turns or description["max_turns"]
    scored = score_records(records, max_turns=max_turns, resamples=resamples)
    result = make_results(
        env={
            "name": config.env,
            "version": records[0].get("env_version") or str(description["version"]),
            "split": split,
            "panel_hash": panels.panel_hash(config.env, split),
            "max_turns": max_turns,
            "split_size": description["splits"][split],
            "kwargs": dict(config.env_kwargs),
        },
        policy=records[0].get("policy") or {"name": config.policy},
        sampling=records[0].get("sampling") or {},
        protocol={
            "k": config.k,
            "limit": config.limit,
            "seed": config.seed,
            "policy_spec": config.policy,
            "task_ids": [task["task_id"] for task in tasks],
            "servers": len(config.servers),
            "concurrency": config.concurrency,
            "time_limit_s": config.time_limit_s,
        },
        scored=scored,
        episodes_file=folder / EPISODES,
        wall_time_s=elapsed,
    )
    result["run_id"] = run_id(config, split, result["policy"])
    return write_results(result, folder / RESULTS)


def _records_for(records: Iterable[dict[str, Any]], wanted: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """One record per wanted (task, sample) pair, the first written where a pair appears twice."""
    kept: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        pair = pair_of(record)
        if pair in wanted and pair not in kept:
            kept[pair] = record
    if not kept:
        raise InvalidArgument("the run finished no episode; see the errors above")
    return list(kept.values())


def rescore_to_results(paths: Iterable[str | Path], out: str | Path, *, resamples: int = 2000) -> list[Path]:
    """Score stored episode files (no environment, no model) into one results file per run found."""
    out = Path(out)
    written = []
    for run in group_runs(load_records(paths)):
        first = run[0]
        scored = score_records(run, resamples=resamples)
        env = {
            "name": first["env"],
            "version": first.get("env_version"),
            "split": first.get("split"),
            "panel_hash": first.get("panel_hash"),
            "max_turns": scored["metrics"]["pass_at_k_t"]["T"][-1],
        }
        result = make_results(
            env=env,
            policy=first.get("policy") or {},
            sampling=first.get("sampling") or {},
            protocol={"rescored": True, "task_ids": sorted({str(r["task_id"]) for r in run})},
            scored=scored,
        )
        label = policy_label(first.get("policy") or {}).split("://")[-1]
        name = "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in f"{first['env']}-{env['split']}-{label}")
        result["run_id"] = name.strip("-")
        written.append(write_results(result, out / f"{result['run_id']}.json"))
    return written

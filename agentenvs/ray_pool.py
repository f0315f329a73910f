"""Sessions as Ray actors: ``RayEnvPool`` places environments on a Ray cluster by resources.

A lab that already runs Ray beside its trainer wants its environments on the same cluster, scheduled by
Ray, not by a scheduler of ours. Each session lives in a Ray actor (``sessions_per_actor`` of them per
actor; 1 by default, so a crash takes one session with it), placed by the resources the actor asks for:
one unit of ``sciworld`` per session when the cluster declares a ``sciworld`` resource (``ray start
--resources '{"sciworld": 8}'`` lets a node hold eight sessions), spread over the nodes. The pool hands
out ``RayEnv``, a real ``gymnasium.Env`` with ``RemoteEnv``'s API, and steps many sessions with one call
per actor (:meth:`RayEnvPool.step_many`, which the rollout driver's rounds use). An actor or a node that dies fails
only its own sessions: their calls raise :class:`SessionLost`, the pool lists them in ``failures`` and
opens a replacement on a live node at the session's next ``reset``.

By default the pool starts a local Ray with token authentication on (a fresh token in a private
folder); ``address=`` joins an existing cluster, whose token comes from ``RAY_AUTH_TOKEN_PATH``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from agentenvs.actions import ExtractedAction
from agentenvs.client import batch_groups, seed_for_reset
from agentenvs.errors import AgentEnvsError, InvalidArgument
from agentenvs.integrations import require
from agentenvs.protocol import AtCapacity, Reset
from agentenvs.ray_host import EnvHost

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


class SessionLost(AgentEnvsError):
    """The Ray actor (or node) holding the session died; ``reset`` opens a replacement on a live node."""

    code = "session_lost"
    http_status = 503


@dataclass(frozen=True)
class SessionFailure:
    """One session lost with its actor: what the pool reports."""

    session_id: str
    env: str
    node_id: str
    error: str


class _Host:
    """An actor holding up to ``capacity`` sessions of one environment, and where it runs."""

    def __init__(self, handle: Any, env: str, node_id: str, capacity: int):
        self.handle, self.env, self.node_id, self.capacity = handle, env, node_id, capacity
        self.sessions: set[str] = set()
        self.alive = True


class RayEnvPool:
    """Environment sessions on Ray actors, with the interface of ``EnvPool`` (make, step_many, close)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        sessions_per_actor: int = 1,
        resources: dict[str, dict[str, float]] | None = None,
        num_cpus: int | None = None,
        token_path: str | Path | None = None,
        placement_timeout_s: float = 60.0,
    ):
        """``address``: None starts a local Ray (``num_cpus`` CPUs) with a fresh token; ``"auto"`` or
        ``HOST:PORT`` joins a running cluster. ``resources``: per environment, what one actor asks for
        (``{"sciworld": {"sciworld": 1, "memory": 2e9}}``); by default one unit of the resource named
        after the environment per session (``{name: sessions_per_actor}``) when the cluster declares it,
        and nothing otherwise (actors take no CPU, so hundreds fit)."""
        if sessions_per_actor < 1:
            raise InvalidArgument(f"sessions_per_actor must be at least 1, got {sessions_per_actor}")
        self.sessions_per_actor = sessions_per_actor
        self.placement_timeout_s = placement_timeout_s
        """How long a new actor may wait for a node with room before ``make`` raises ``AtCapacity``."""
        self.resources = dict(resources or {})
        self.failures: list[SessionFailure] = []
        self.opened: list[tuple[str, str]] = []
        """Every session opened, replacements included, with the node it went to."""
        self.envs: list[RayEnv] = []
        self._hosts: list[_Host] = []
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._creating = threading.Lock()
        self._token_dir: tempfile.TemporaryDirectory | None = None
        self._temp_dir: tempfile.TemporaryDirectory | None = None
        """The local Ray's session folder (logs, sockets), removed with the pool."""
        self._owns_ray = False
        self._connect(address, num_cpus, token_path)
        self._cluster = self.ray.cluster_resources()

    def _connect(self, address: str | None, num_cpus: int | None, token_path: str | Path | None) -> None:
        """Token auth on for every Ray process this pool starts or talks to."""
        if token_path is not None:
            os.environ["RAY_AUTH_TOKEN_PATH"] = str(token_path)
        elif address is None and "RAY_AUTH_TOKEN_PATH" not in os.environ and "RAY_AUTH_TOKEN" not in os.environ:
            self._token_dir = tempfile.TemporaryDirectory(prefix="agentenvs-ray-")
            path = Path(self._token_dir.name) / "auth_token"
            path.write_text(secrets.token_hex(32))
            path.chmod(0o600)
            os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
        os.environ["RAY_AUTH_MODE"] = "token"
        imported_before = "ray" in sys.modules
        self.ray = require("integrations-cpu", "ray", "RayEnvPool")
        if imported_before:  # Ray read its config at import: have it read the token mode again
            self.ray._raylet.Config.initialize("")
        if self.ray.is_initialized():
            return
        if address is None:
            self._temp_dir = tempfile.TemporaryDirectory(prefix="agentenvs-ray-")
            self.ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                logging_level="ERROR",
                _temp_dir=self._temp_dir.name,
            )
        else:
            self.ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        self._owns_ray = True

    def actor_options(self, name: str) -> dict[str, Any]:
        """How an actor of ``name`` is placed: its resources, spread over the nodes, never restarted
        (a restarted actor would have lost its sessions' state anyway: the pool replaces them instead)."""
        declared = {name: float(self.sessions_per_actor)} if name in self._cluster else {}
        wanted = dict(self.resources.get(name) or declared)
        num_cpus = wanted.pop("num_cpus", 0)
        memory = wanted.pop("memory", None)
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "resources": wanted,
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
        }
        if memory is not None:
            options["memory"] = memory
        return options

    def _host_for(self, name: str, session_id: str) -> _Host:
        """A live actor of ``name`` with a free slot, taken for ``session_id``; a new actor when none has
        room (made one at a time, so threads opening sessions together do not make an actor each)."""
        with self._creating:
            with self._lock:
                for host in self._hosts:
                    if host.alive and host.env == name and len(host.sessions) < host.capacity:
                        host.sessions.add(session_id)
                        return host
            host = self._new_host(name)
            with self._lock:
                host.sessions.add(session_id)
                self._hosts.append(host)
            return host

    def _new_host(self, name: str) -> _Host:
        """Start an actor for ``name`` where Ray finds room, and learn its node."""
        options = self.actor_options(name)
        deadline = time.monotonic() + self.placement_timeout_s
        while True:  # an actor sent to a node that just died (Ray has not noticed yet) is sent again
            handle = self.ray.remote(EnvHost).options(**options).remote()
            try:
                node_id = self.ray.get(handle.node_id.remote(), timeout=max(0.1, deadline - time.monotonic()))
                break
            except self.ray.exceptions.GetTimeoutError:
                self.ray.kill(handle)
                raise AtCapacity(
                    f"no Ray node had room for another {name} actor (asking {options['resources'] or 'no resources'}"
                    f", {options['num_cpus']} CPU) within {self.placement_timeout_s:g} s: add nodes, declare more "
                    "of the resource on them, or close sessions"
                ) from None
            except self.ray.exceptions.RayActorError as exc:
                if time.monotonic() > deadline:
                    raise SessionLost(f"every new actor for {name} died before it started: {exc}") from None
                time.sleep(0.2)
        return _Host(handle, name, node_id, self.sessions_per_actor)

    def open(self, name: str, kwargs: dict[str, Any]) -> tuple[_Host, str, dict[str, Any]]:
        """A new session of ``name`` on a live actor: the actor, the session id and ``describe()``.

        An actor found dead while opening (its node died and Ray has not said so yet) held no session
        of this one: it is dropped and the session opens elsewhere."""
        session_id = f"{name}-{next(self._ids)}"
        while True:
            host = self._host_for(name, session_id)
            try:
                description = self.ray.get(host.handle.open.remote(session_id, name, kwargs))
            except self.ray.exceptions.RayActorError:
                with self._lock:
                    host.alive = False
                    host.sessions.discard(session_id)
                continue
            except BaseException as exc:
                with self._lock:
                    host.sessions.discard(session_id)
                if isinstance(exc, self.ray.exceptions.RayTaskError):
                    raise exc.as_instanceof_cause() from None
                raise
            with self._lock:
                self.opened.append((session_id, host.node_id))
            return host, session_id, description

    def call(self, host: _Host, session_id: str, method: str, *args: Any) -> Any:
        """One actor call for one session; a dead actor becomes :class:`SessionLost`."""
        try:
            return self.ray.get(getattr(host.handle, method).remote(session_id, *args))
        except self.ray.exceptions.RayActorError as exc:
            raise self._lost(host, session_id, exc) from None
        except self.ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def _lost(self, host: _Host, session_id: str, exc: BaseException) -> SessionLost:
        """Mark the actor dead and report the session."""
        with self._lock:
            host.alive = False
            host.sessions.discard(session_id)
            self.failures.append(SessionFailure(session_id, host.env, host.node_id, type(exc).__name__))
        return SessionLost(
            f"the Ray actor holding session {session_id} ({host.env}) on node {host.node_id[:12]} died "
            f"({type(exc).__name__}); reset() opens a replacement on a live node"
        )

    def make(self, name: str, **kwargs: Any) -> RayEnv:
        """A session of environment ``name`` (keywords go to its constructor in the actor)."""
        env = RayEnv(self, name, **kwargs)
        with self._lock:
            self.envs.append(env)
        return env

    def make_many(self, name: str, count: int, **kwargs: Any) -> list[RayEnv]:
        return [self.make(name, **kwargs) for _ in range(count)]

    def step_many(self, envs: Sequence[RayEnv], actions: Sequence[Any]) -> list[Any]:
        """Step many sessions: one call per actor, all in flight at once. One item per env, in order:
        the step's tuple or its exception (:class:`SessionLost` for a session whose actor died). An action
        may be a :class:`~agentenvs.protocol.Reset`, as in ``EnvPool.step_many``; a lost session's reset
        reopens it on a live node, as ``reset()`` does."""
        groups = batch_groups(envs, actions, lambda env: env.host)
        results: list[Any] = [None] * len(envs)
        sent, answered = list(actions), set()
        for index, (env, action) in enumerate(zip(envs, actions, strict=True)):
            if isinstance(action, Reset) and env._lost:
                results[index] = _reopened(env, action)
                answered.add(index)
            elif isinstance(action, Reset):
                sent[index] = Reset(seed_for_reset(env, action.seed), action.options)
        calls = []
        for group in groups:
            indexes = [i for i in group if i not in answered]
            if indexes:
                host = envs[indexes[0]].host
                items = [(envs[i].session_id, sent[i]) for i in indexes]
                calls.append((host, indexes, host.handle.step_many.remote(items)))
        for host, indexes, ref in calls:
            try:
                answers = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as exc:
                answers = [self._lost(host, envs[i].session_id, exc) for i in indexes]
            for index, answer in zip(indexes, answers, strict=True):
                results[index] = self._accept_item(envs[index], sent[index], answer)
        return results

    @staticmethod
    def _accept_item(env: RayEnv, action: Any, answer: Any) -> Any:
        if isinstance(answer, SessionLost):
            env._lost = True
        if not isinstance(answer, tuple):
            return answer
        return env._accept_reset(*answer) if isinstance(action, Reset) else env._accept(answer)

    def load(self) -> dict[str, int]:
        """Open sessions per Ray node id."""
        counts: dict[str, int] = {}
        with self._lock:
            for host in self._hosts:
                if host.alive and host.sessions:
                    counts[host.node_id] = counts.get(host.node_id, 0) + len(host.sessions)
        return counts

    def forget(self, host: _Host, session_id: str) -> None:
        with self._lock:
            host.sessions.discard(session_id)

    def close(self) -> None:
        """Close every session and actor; stop the local Ray this pool started."""
        with self._lock:
            envs, self.envs = self.envs, []
            hosts, self._hosts = self._hosts, []
        for env in envs:
            env.close()
        for host in hosts:
            if host.alive:
                self.ray.kill(host.handle)
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False
        for folder in (self._token_dir, self._temp_dir):
            if folder is not None:
                folder.cleanup()
        self._token_dir = self._temp_dir = None

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return sum(not env.closed for env in self.envs)


class RayEnv(gym.Env[str, str]):
    """A session on a Ray actor with the public API of ``TextEnv`` and ``RemoteEnv``."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(self, pool: RayEnvPool, name: str, **kwargs: Any):
        self.pool, self.name, self.kwargs = pool, name, kwargs
        self.closed = False
        self._open()
        description = self._description
        from agentenvs.core import TEXT_CHARSET, TextEnv

        self.version = description.get("version", "")
        self.max_turns = description.get("max_turns")
        self.max_action_chars = description.get("max_action_chars", 4096)
        self.observation_space = spaces.Text(max_length=TextEnv.max_observation_chars, charset=TEXT_CHARSET)
        self.action_space = spaces.Text(max_length=self.max_action_chars, min_length=0, charset=TEXT_CHARSET)
        self.render_mode = None
        self._last_observation = ""

    def _open(self) -> None:
        self.host, self.session_id, self._description = self.pool.open(self.name, self.kwargs)
        self._lost = False
        self._turn, self._done = 0, False

    def __repr__(self) -> str:
        return f"RayEnv({self.name!r}, session={self.session_id}, node={self.host.node_id[:12]})"

    @property
    def node_id(self) -> str:
        return self.host.node_id

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def done(self) -> bool:
        return self._done

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return self.pool.call(self.host, self.session_id, method, *args)
        except SessionLost:
            self._lost = True
            raise

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if self._lost:  # the actor died: a replacement session on a live node
            self._open()
        return self._accept_reset(*self._call("reset", seed_for_reset(self, seed), options))

    def _accept_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._turn, self._done, self._last_observation = 0, False, observation
        return observation, info

    def step(self, action: str) -> StepResult:
        return self._accept(self._call("step", action))

    def _accept(self, result: StepResult) -> StepResult:
        observation, _, terminated, truncated, info = result
        self._turn = info.get("turn", self._turn + 1)
        self._done = bool(terminated or truncated)
        self._last_observation = observation
        return result

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def extract_action(self, response: str) -> ExtractedAction | None:
        return self._call("extract_action", response)

    def get_state(self) -> dict[str, Any]:
        return self._call("get_state")

    def set_state(self, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        observation, info = self._call("set_state", state)
        self._turn, self._done = info.get("turn", 0), bool(info.get("end_reason"))
        return observation, info

    def render(self) -> str | None:
        return self._last_observation

    def close(self) -> None:
        """Close the session in its actor (idempotent; a lost session has nothing left to close)."""
        if self.closed:
            return
        self.closed = True
        if not self._lost:
            with contextlib.suppress(AgentEnvsError):
                self._call("close")
        self.pool.forget(self.host, self.session_id)


def _reopened(env: RayEnv, reset: Reset) -> Any:
    """The reset of a session whose actor died: reopened on a live node, or the error of trying."""
    try:
        return env.reset(seed=reset.seed, options=reset.options)
    except AgentEnvsError as exc:
        return exc

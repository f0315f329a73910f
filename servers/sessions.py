"""``SessionManager``: sessions, their leases and limits, pinned to worker processes.

It owns every rule of docs/protocol.md that is not HTTP: the session cap, the idle lease reaper, the step time
limit, idempotent step retries by ``turn``, one request at a time per session, the token that opened a
session, and what happens to the sessions of a worker that dies (they fail with ``env_failed`` once,
then are unknown; the worker is replaced).
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError, EnvFailed, InvalidArgument, UnknownEnv
from agentenvs.protocol import (
    AtCapacity,
    BatchItem,
    CreateSession,
    ResetRequest,
    SessionBusy,
    ShuttingDown,
    StepRequest,
    StepTimeout,
    TurnMismatch,
    UnknownSession,
)
from agentenvs.servers.auth import same_owner
from agentenvs.servers.messages import Failure, Outcome, Result
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.worker import WorkerHandle, failed

UNSAFE_KWARG = re.compile(r"path|dir|file|root|cmd|command|exec|shell|url|host|port|socket", re.IGNORECASE)
"""Constructor keywords a request may not set: whatever names a file, a command or a network address is
configured by whoever runs the server, so nothing from a request reaches a path or a shell."""
RESERVED_KWARGS = frozenset({"privileged", "render_mode"})
TOMBSTONES = 20000
PROBE_TIMEOUT_S = 5.0
"""How long a worker with a free thread may take to answer a ping after one of its calls timed out."""

log = logging.getLogger("agentenvs.servers")


@dataclass
class ServerConfig:
    """Everything ``agentenvs serve`` configures (see ``agentenvs serve --help``)."""

    envs: dict[str, str | None]
    """Served environment names; a value is an entry point to register (``module:Class``) or None."""
    workers: int = 2
    worker_threads: int = 16
    max_sessions: int = 512
    lease_ttl_s: float = 600.0
    step_timeout_s: float = 60.0
    setup_timeout_s: float = 300.0
    retry_after_s: int = 2
    tokens: tuple[str, ...] = ()


@dataclass
class Session:
    id: str
    env: str
    worker: WorkerHandle
    token_digest: bytes | None
    privileged: bool
    last_used: float
    turn: int = 0
    done: bool = False
    last_step: tuple[int, bytes] | None = None
    """``(turn the client sent, answer)`` of the last step, given back to a retry of it."""
    busy: bool = False


@dataclass
class Tombstone:
    """Why a session id is no longer open; ``error`` is raised once (a worker death), then 404."""

    token_digest: bytes | None
    message: str
    error: type[AgentEnvsError] = UnknownSession
    extra: dict[str, Any] = field(default_factory=dict)


class SessionManager:
    """Open, drive and close sessions on a pool of worker processes."""

    def __init__(self, config: ServerConfig, metrics: Metrics | None = None):
        if config.workers < 1:
            raise InvalidArgument("--workers must be at least 1")
        if config.max_sessions < 1:
            raise InvalidArgument("--max-sessions must be at least 1")
        self.config = config
        self.metrics = metrics or Metrics()
        self.descriptions: dict[str, dict[str, Any]] = {}
        self.task_ids: dict[str, dict[str, list[str]]] = {}
        """The task ids of each served environment by split, for the OpenAPI document's reset options."""
        self._entry_points = {name: ep for name, ep in config.envs.items() if ep}
        self._sessions: dict[str, Session] = {}
        self._tombstones: OrderedDict[str, Tombstone] = OrderedDict()
        self._creating = 0
        self._lock = threading.Lock()
        self._workers: list[WorkerHandle] = []
        self._stopping = threading.Event()
        self.draining = False
        self._reaper: threading.Thread | None = None

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the workers, describe every served environment (which checks it can be built), start the reaper."""
        self._workers = [self._spawn(i) for i in range(self.config.workers)]
        for name in self.config.envs:
            outcome = self._workers[0].call("describe_env", None, (name,)).result(self.config.setup_timeout_s)
            if not outcome.ok:
                failure: Failure = outcome.payload
                raise protocol.error_class(failure.code)(f"cannot serve {name!r}: {failure.message}")
            self.descriptions[name] = outcome.payload["description"]
            self.task_ids[name] = outcome.payload["task_ids"]
        if self.config.lease_ttl_s > 0:
            self._reaper = threading.Thread(target=self._reap_loop, name="lease-reaper", daemon=True)
            self._reaper.start()

    def _spawn(self, index: int) -> WorkerHandle:
        return WorkerHandle(index, self._entry_points, self.config.worker_threads, self._worker_died)

    def shutdown(self) -> None:
        """Close every session and stop the workers (after the HTTP server stopped taking requests)."""
        self.draining = True
        self._stopping.set()
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.worker.call("close", session.id)
        for worker in self._workers:
            worker.stop()

    def _worker_died(self, worker: WorkerHandle) -> None:
        if self._stopping.is_set():
            return
        message = worker.death_message()
        with self._lock:
            lost = [s for s in self._sessions.values() if s.worker is worker]
            for session in lost:
                del self._sessions[session.id]
                self._bury(session, message, EnvFailed)
        self.metrics.inc("agentenvs_sessions_closed_total", (("reason", "worker_died"),), len(lost))
        self.metrics.inc("agentenvs_worker_restarts_total")
        replacement = self._spawn(worker.index)
        with self._lock:
            self._workers[worker.index] = replacement

    def _probe(self, worker: WorkerHandle) -> None:
        """After a timeout: a worker with a free thread that cannot answer a ping is wedged (an engine holding
        the GIL in C code); kill it, so its sessions fail and a fresh worker takes new ones instead of it
        swallowing every session pinned to it."""
        if worker.in_flight >= self.config.worker_threads:
            return
        try:
            worker.call("ping", None).result(PROBE_TIMEOUT_S)
        except FutureTimeout:
            log.warning("worker pid %s did not answer a ping within %s s; killing it", worker.pid, PROBE_TIMEOUT_S)
            self.metrics.inc("agentenvs_workers_killed_total")
            worker.process.kill()
        except EnvFailed:
            pass

    def _reap_loop(self) -> None:
        interval = max(0.05, min(self.config.lease_ttl_s / 4, 5.0))
        while not self._stopping.wait(interval):
            self.reap()

    def reap(self) -> int:
        """Close the sessions idle for longer than the lease; the number closed."""
        ttl = self.config.lease_ttl_s
        cutoff = time.monotonic() - ttl
        with self._lock:
            idle = [s for s in self._sessions.values() if not s.busy and s.last_used < cutoff]
            for session in idle:
                del self._sessions[session.id]
                self._bury(session, f"session {session.id} expired after {ttl:g} s idle (the lease); open a new one")
        for session in idle:
            self._release_worker_slot(session)
        if idle:
            self.metrics.inc("agentenvs_sessions_closed_total", (("reason", "expired"),), len(idle))
        return len(idle)

    # ------------------------------------------------------------------ bookkeeping

    def _bury(self, session: Session, message: str, error: type[AgentEnvsError] = UnknownSession) -> None:
        """Record why ``session`` is closed (call with the lock held)."""
        self._tombstones[session.id] = Tombstone(session.token_digest, message, error)
        while len(self._tombstones) > TOMBSTONES:
            self._tombstones.popitem(last=False)

    def _release_worker_slot(self, session: Session) -> None:
        with self._lock:
            session.worker.sessions -= 1
        session.worker.call("close", session.id)

    def _acquire(self, session_id: str, digest: bytes | None) -> Session:
        if not protocol.SESSION_ID.match(session_id):
            raise UnknownSession(f"no session {session_id[:40]!r}: session ids are 32 lower-case hex characters")
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or not same_owner(session.token_digest, digest):
                tomb = self._tombstones.get(session_id)
                if tomb is not None and same_owner(tomb.token_digest, digest):
                    if tomb.error is not UnknownSession:
                        self._tombstones[session_id] = Tombstone(tomb.token_digest, tomb.message)
                    raise tomb.error(tomb.message)
                raise UnknownSession(f"no open session {session_id}; open one with POST /v1/sessions")
            if session.busy:
                raise SessionBusy(
                    f"session {session_id} is still serving another request; send one request at a time per session"
                )
            session.busy = True
            session.last_used = time.monotonic()
            return session

    def _release(self, session: Session) -> None:
        with self._lock:
            session.busy = False
            session.last_used = time.monotonic()

    def _close(self, session: Session, message: str, reason: str, *, reported: bool = False) -> None:
        """Close ``session``; ``reported``: this request tells the client, so later ones just get 404."""
        with self._lock:
            open_ = self._sessions.pop(session.id, None) is not None
            if open_ or reported:
                self._bury(session, message)
        if open_:
            self._release_worker_slot(session)
            self.metrics.inc("agentenvs_sessions_closed_total", (("reason", reason),))

    def _timed_out(self, session: Session, op: str, timeout: float) -> StepTimeout:
        message = f"the {op} ran past the server's limit of {timeout:g} s; session {session.id} is closed"
        self._close(session, message, "timeout")
        threading.Thread(target=self._probe, args=(session.worker,), name="probe", daemon=True).start()
        return StepTimeout(message + ": open a new one (the server's --step-timeout sets the limit)")

    def _wait(self, session: Session, future: Future, op: str, timeout: float) -> Any:
        """The payload of a worker call; errors become exceptions, and timeouts and crashes close the session."""
        started = time.perf_counter()
        try:
            outcome = future.result(timeout)
        except FutureTimeout:
            raise self._timed_out(session, op, timeout) from None
        except EnvFailed as exc:
            self._close(session, f"session {session.id} is closed: {exc}", "worker_died", reported=True)
            raise EnvFailed(str(exc)) from None
        finally:
            self.metrics.observe("agentenvs_env_call_duration_seconds", time.perf_counter() - started, (("op", op),))
        return self._unpack(session, outcome)

    def _unpack(self, session: Session, outcome: Outcome) -> Any:
        if outcome.ok:
            return outcome.payload
        failure: Failure = outcome.payload
        if failure.fatal:
            message = f"session {session.id} was closed after its environment failed: {failure.message}"
            self._close(session, message, "failed")
        error = protocol.error_class(failure.code)(failure.message)
        error.code, error.http_status = failure.code, failure.http_status
        raise error

    # ------------------------------------------------------------------ the operations

    def create(self, request: CreateSession, owner: bytes | None = None) -> dict[str, Any]:
        if self.draining:
            raise ShuttingDown("the server is shutting down; open the session on another server")
        if request.env not in self.descriptions:
            raise UnknownEnv(
                f"no environment named {request.env!r} is served here; served: {sorted(self.descriptions)}"
            )
        for key in request.kwargs:
            if key in RESERVED_KWARGS:
                raise InvalidArgument(f'{key!r} is not a constructor keyword here; send "privileged" at the top level')
            if UNSAFE_KWARG.search(key):
                raise InvalidArgument(
                    f"the server does not take the keyword {key!r} from a request: keywords naming files, "
                    "commands or addresses are set by whoever runs the server"
                )
        with self._lock:
            if len(self._sessions) + self._creating >= self.config.max_sessions:
                raise AtCapacity(
                    f"the server holds its maximum of {self.config.max_sessions} sessions; retry after "
                    f"{self.config.retry_after_s} s, close idle sessions, or use another server",
                    retry_after=self.config.retry_after_s,
                )
            live = [w for w in self._workers if w.alive]
            if not live:
                raise EnvFailed("no worker process is alive; the server is replacing them, retry in a few seconds")
            worker = min(live, key=lambda w: w.sessions)
            worker.sessions += 1
            self._creating += 1
        session_id = secrets.token_hex(16)
        digest = owner
        session = Session(session_id, request.env, worker, digest, request.privileged, time.monotonic(), busy=True)
        try:
            future = worker.call("create", session_id, (request.env, request.kwargs, request.privileged))
            try:
                description = self._wait(session, future, "create", self.config.setup_timeout_s)
            except BaseException:
                self._release_worker_slot(session)
                raise
            session.busy = False
            with self._lock:
                self._sessions[session_id] = session
        finally:
            with self._lock:
                self._creating -= 1
        self.metrics.inc("agentenvs_sessions_opened_total", (("env", request.env),))
        return {
            "session_id": session_id,
            "lease_ttl_s": self.config.lease_ttl_s,
            "step_timeout_s": self.config.step_timeout_s,
            "env": description,
        }

    def close(self, session_id: str, owner: bytes | None = None) -> None:
        """Close a session; closing one that is closed or unknown is not an error (DELETE is idempotent)."""
        digest = owner
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or not same_owner(session.token_digest, digest):
                return
        self._close(session, f"session {session_id} is closed (DELETE); open a new one", "deleted")

    def _drive(self, session_id: str, owner: bytes | None, op: str, args: tuple, timeout: float | None = None) -> bytes:
        session = self._acquire(session_id, owner)
        try:
            future = session.worker.call(op, session.id, args)
            result: Result = self._wait(session, future, op, timeout or self.config.step_timeout_s)
            session.turn, session.done = result.turn, result.done
            if op in ("reset", "set_state"):
                session.last_step = None
            return result.body
        finally:
            self._release(session)

    def reset(self, session_id: str, request: ResetRequest, owner: bytes | None = None) -> bytes:
        return self._drive(session_id, owner, "reset", (request.seed, request.options), self.config.setup_timeout_s)

    def get_state(self, session_id: str, owner: bytes | None = None) -> bytes:
        return self._drive(session_id, owner, "get_state", ())

    def set_state(self, session_id: str, state: dict[str, Any], owner: bytes | None = None) -> bytes:
        return self._drive(session_id, owner, "set_state", (state,), self.config.setup_timeout_s)

    def describe(self, session_id: str, owner: bytes | None = None) -> bytes:
        return self._drive(session_id, owner, "describe", ())

    def extract_action(self, session_id: str, response: str, owner: bytes | None = None) -> bytes:
        return self._drive(session_id, owner, "extract_action", (response,))

    def session_info(self, session_id: str, owner: bytes | None = None) -> dict[str, Any]:
        session = self._acquire(session_id, owner)
        try:
            return {
                "session_id": session.id,
                "env": session.env,
                "turn": session.turn,
                "done": session.done,
                "privileged": session.privileged,
                "worker": session.worker.index,
                "worker_pid": session.worker.pid,
                "lease_ttl_s": self.config.lease_ttl_s,
            }
        finally:
            self._release(session)

    def _stored_or_check(self, session: Session, turn: int) -> bytes | None:
        """The stored answer when ``turn`` retries the last step; raises on any other mismatch."""
        if session.last_step is not None and session.last_step[0] == turn and turn == session.turn - 1:
            return session.last_step[1]
        if turn != session.turn:
            raise TurnMismatch(
                f"step sent turn={turn} but session {session.id} has taken {session.turn} steps: send "
                f"turn={session.turn} for the next step (turn={session.turn - 1} repeats the last answer)"
            )
        return None

    def _record_step(self, session: Session, turn: int, result: Result) -> bytes:
        session.turn, session.done = result.turn, result.done
        session.last_step = (turn, result.body)
        self.metrics.inc("agentenvs_steps_total", (("env", session.env),))
        return result.body

    def step(self, session_id: str, request: StepRequest, owner: bytes | None = None) -> bytes:
        session = self._acquire(session_id, owner)
        try:
            stored = self._stored_or_check(session, request.turn)
            if stored is not None:
                return stored
            future = session.worker.call("step", session.id, (request.action,))
            result = self._wait(session, future, "step", self.config.step_timeout_s)
            return self._record_step(session, request.turn, result)
        finally:
            self._release(session)

    def batch_step(self, items: list[BatchItem | AgentEnvsError], owner: bytes | None = None) -> list[bytes]:
        """One answer per item, in order: a step answer or ``{"error": ...}``; items on one worker go as one call."""
        digest = owner
        results: list[bytes | None] = [None] * len(items)
        held: list[Session] = []
        groups: dict[int, list[tuple[int, Session, BatchItem]]] = {}
        for index, item in enumerate(items):
            try:
                if isinstance(item, AgentEnvsError):
                    raise item
                session = self._acquire(item.session_id, digest)
                held.append(session)
                stored = self._stored_or_check(session, item.turn)
                if stored is not None:
                    results[index] = stored
                    continue
                groups.setdefault(id(session.worker), []).append((index, session, item))
            except AgentEnvsError as exc:
                results[index] = _error_item(exc, self.metrics)
        try:
            calls = [
                (group, group[0][1].worker.call("batch", None, [(s.id, it.action) for _, s, it in group]))
                for group in groups.values()
            ]
            deadline = time.monotonic() + self.config.step_timeout_s
            for group, future in calls:
                try:
                    answers = future.result(max(0.0, deadline - time.monotonic())).payload
                except FutureTimeout:
                    answers = [None] * len(group)
                except EnvFailed as exc:
                    answers = [failed(str(exc))] * len(group)
                for (index, session, item), answer in zip(group, answers, strict=False):
                    results[index] = self._batch_answer(session, item, answer)
        finally:
            for session in held:
                self._release(session)
        return [r if r is not None else b"null" for r in results]

    def _batch_answer(self, session: Session, item: BatchItem, answer: Outcome | None) -> bytes:
        try:
            if answer is None:
                raise self._timed_out(session, "step", self.config.step_timeout_s)
            return self._record_step(session, item.turn, self._unpack(session, answer))
        except AgentEnvsError as exc:
            return _error_item(exc, self.metrics)

    # ------------------------------------------------------------------ what /healthz and /metrics show

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` answer: ok, degraded (no worker alive) or draining."""
        stats = self.stats()
        alive = sum(w["alive"] for w in stats["workers"])
        status = "draining" if self.draining else ("ok" if alive else "degraded")
        return {
            "status": status,
            "protocol": protocol.PROTOCOL_VERSION,
            "sessions": stats["sessions"],
            "workers_alive": alive,
        }

    def render_metrics(self, in_flight: Any = None) -> str:
        """The ``/metrics`` text: the counters and histograms, with the session and worker gauges of now."""
        stats = self.stats()
        gauges = {
            "agentenvs_sessions_active": {(("env", e),): float(n) for e, n in stats["sessions_by_env"].items()},
            "agentenvs_workers_alive": {(): float(sum(w["alive"] for w in stats["workers"]))},
        }
        if in_flight is not None:
            gauges["agentenvs_requests_in_flight"] = {(): float(in_flight.count)}
        return self.metrics.render(gauges)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            by_env: dict[str, int] = {}
            for session in self._sessions.values():
                by_env[session.env] = by_env.get(session.env, 0) + 1
            workers = [
                {"index": w.index, "pid": w.pid, "alive": w.alive, "sessions": w.sessions} for w in self._workers
            ]
        return {"sessions": sum(by_env.values()), "sessions_by_env": by_env, "workers": workers}


def _error_item(exc: AgentEnvsError, metrics: Metrics) -> bytes:
    metrics.inc("agentenvs_errors_total", (("code", exc.code),))
    return protocol.dumps(protocol.error_body(exc.code, str(exc)))

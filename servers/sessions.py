"""``SessionManager``: sessions, their leases and limits, pinned to worker processes.

It owns every rule of docs/protocol.md that is not HTTP: the session cap, the idle lease reaper, the step time
limit, idempotent step retries by ``turn``, one request at a time per session, the token that opened a
session, and what happens to the sessions of a worker that dies or is replaced (they fail with ``worker_lost``
once, then are unknown). A call past its time limit closes its session at once, but the session's environment
is freed, and its slot on the worker given back, only when the call returns (or the worker is replaced):
closing never waits on a hung call, and a worker full of hung calls does not look empty. The bookkeeping of
open and closed sessions is ``servers/session_table.py``; starting, watching and replacing the workers is
``servers/pool.py``; idempotency keys of creates are ``servers/idempotency.py``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError, InvalidArgument, UnknownEnv
from agentenvs.protocol import (
    AtCapacity,
    BatchItem,
    BatchReset,
    CreateSession,
    ResetRequest,
    ShuttingDown,
    StepRequest,
    StepTimeout,
    TurnMismatch,
    WorkerLost,
)
from agentenvs.servers.idempotency import CreateKeys, check_key
from agentenvs.servers.inline import InlineHost
from agentenvs.servers.messages import Failure, Outcome, Result
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.pool import Probing, WorkerPool
from agentenvs.servers.session_table import Session, SessionTable
from agentenvs.servers.worker import WorkerHandle, lost

UNSAFE_KWARG = re.compile(r"path|dir|file|root|cmd|command|exec|shell|url|host|port|socket", re.IGNORECASE)
"""Constructor keywords a request may not set: whatever names a file, a command or a network address is
configured by whoever runs the server, so nothing from a request reaches a path or a shell."""
RESERVED_KWARGS = frozenset({"privileged", "render_mode"})


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
    isolate: bool = False
    """Hold every environment in worker processes, also those that declare themselves inline (``EnvSpec.inline``)."""
    probing: Probing = field(default_factory=Probing)
    """How often workers get a heartbeat and how long one may stay silent (``servers/pool.py``)."""


class SessionManager:
    """Open, drive and close sessions on a pool of worker processes."""

    def __init__(self, config: ServerConfig, metrics: Metrics | None = None):
        if config.workers < 1:
            raise InvalidArgument("--workers must be at least 1")
        if config.max_sessions < 1:
            raise InvalidArgument("--max-sessions must be at least 1")
        if config.probing.interval_s <= 0 or config.probing.timeout_s < config.probing.interval_s:
            raise InvalidArgument("--probe-interval must be above 0 and --probe-timeout at least --probe-interval")
        self.config = config
        self.metrics = metrics or Metrics()
        self.descriptions: dict[str, dict[str, Any]] = {}
        self.task_ids: dict[str, dict[str, list[str]]] = {}
        """The task ids of each served environment by split, for the OpenAPI document's reset options."""
        entry_points = {name: ep for name, ep in config.envs.items() if ep}
        self._table = SessionTable()
        inline = frozenset(n for n in config.envs if not (config.isolate or n in entry_points) and _inline(n))
        self._pool = WorkerPool(
            config.workers, entry_points, config.worker_threads, self.metrics, self._lose_worker, inline, config.probing
        )
        self._keys = CreateKeys(lambda session_id: session_id in self._table.sessions)
        self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="closer")
        """Frees the environments of closed sessions when their overdue calls return (never on a worker's reader)."""
        self._stopping = threading.Event()
        self.draining = False
        self._reaper: threading.Thread | None = None

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the workers, describe every served environment (which checks it can be built), start the reaper."""
        self._pool.start()
        for name in self.config.envs:
            outcome = self._pool.workers[0].call("describe_env", None, (name,)).result(self.config.setup_timeout_s)
            if not outcome.ok:
                failure: Failure = outcome.payload
                raise protocol.error_class(failure.code)(f"cannot serve {name!r}: {failure.message}")
            self.descriptions[name] = outcome.payload["description"]
            self.task_ids[name] = outcome.payload["task_ids"]
        if self.config.lease_ttl_s > 0:
            self._reaper = threading.Thread(target=self._reap_loop, name="lease-reaper", daemon=True)
            self._reaper.start()

    def shutdown(self) -> None:
        """Close every session and stop the workers (after the HTTP server stopped taking requests)."""
        self.draining = True
        self._stopping.set()
        self._pool.stopping.set()
        for session in self._table.clear():
            session.worker.call("close", session.id)
        self._pool.stop()
        self._closer.shutdown(wait=False)

    def _lose_worker(self, worker: WorkerHandle) -> None:
        """A worker died or was replaced: its sessions fail with ``worker_lost`` once, then are unknown."""
        message = worker.death_message()
        gone = self._table.remove_where(lambda s: s.worker is not worker, lambda s: message, WorkerLost)
        self.metrics.inc("agentenvs_sessions_closed_total", (("reason", "worker_lost"),), len(gone))

    def _reap_loop(self) -> None:
        interval = max(0.05, min(self.config.lease_ttl_s / 4, 5.0))
        while not self._stopping.wait(interval):
            self.reap()

    def reap(self) -> int:
        """Close the sessions idle for longer than the lease; the number closed."""
        ttl = self.config.lease_ttl_s
        cutoff = time.monotonic() - ttl
        idle = self._table.remove_where(
            lambda s: s.busy or s.last_used >= cutoff,
            lambda s: f"session {s.id} expired after {ttl:g} s idle (the lease); open a new one",
        )
        for session in idle:
            self._dispose(session)
        if idle:
            self.metrics.inc("agentenvs_sessions_closed_total", (("reason", "expired"),), len(idle))
        return len(idle)

    # ------------------------------------------------------------------ bookkeeping

    def _free(self, session: Session) -> None:
        """Give the session's slot on its worker back and close its environment there (a dead worker has none)."""
        with self._table.lock:
            session.worker.sessions -= 1
        if session.worker.alive:
            session.worker.call("close", session.id)

    def _dispose(self, session: Session) -> None:
        """``session`` is closed: free it now, or when the request (or the overdue call) holding it lets go."""
        if self._table.closing(session):
            self._free(session)

    def _let_go(self, session: Session) -> None:
        """The request holding ``session`` is done with it; a call past its limit keeps holding it."""
        if not session.overdue and self._table.release(session):
            self._free(session)

    def _close(self, session: Session, message: str, reason: str, *, reported: bool = False) -> None:
        """Close ``session``; ``reported``: this request tells the client, so later ones just get 404."""
        if self._table.remove(session, message, reported=reported):
            self.metrics.inc("agentenvs_sessions_closed_total", (("reason", reason),))
            self._dispose(session)

    def _timed_out(self, session: Session, op: str, timeout: float, future: Future) -> StepTimeout:
        """Close ``session`` now (a tombstone); its call keeps it until it returns, then its environment is freed."""
        message = f"the {op} ran past the server's limit of {timeout:g} s; session {session.id} is closed"
        session.overdue = True
        self._close(session, message, "timeout")
        self._dispose(session)  # a session being created is in no table, but it is closed all the same
        future.add_done_callback(lambda _: self._after_overdue(session))
        return StepTimeout(message + ": open a new one (the server's --step-timeout sets the limit)")

    def _after_overdue(self, session: Session) -> None:
        """An overdue call returned (or its worker died): free its session, on the closer thread."""

        def settle() -> None:
            session.overdue = False
            self._let_go(session)

        with contextlib.suppress(RuntimeError):  # the server is shutting down: the workers go anyway
            self._closer.submit(settle)

    def _wait(self, session: Session, future: Future, op: str, timeout: float) -> Any:
        """The payload of a worker call; errors become exceptions, and timeouts and crashes close the session."""
        started = time.perf_counter()
        try:
            outcome = future.result(timeout)
        except FutureTimeout:
            error = self._timed_out(session, op, timeout, future)
            self._pool.count_overdue(session.worker, future)  # after the tombstone: it may replace the worker
            raise error from None
        except WorkerLost as exc:
            self._close(session, f"session {session.id} is closed: {exc}", "worker_lost", reported=True)
            raise WorkerLost(str(exc)) from None
        finally:
            self.metrics.observe("agentenvs_env_call_duration_seconds", time.perf_counter() - started, (("op", op),))
        return self._unpack(session, outcome)

    def _unpack(self, session: Session, outcome: Outcome) -> Any:
        if outcome.ok:
            return outcome.payload
        failure: Failure = outcome.payload
        if failure.fatal:
            message = f"session {session.id} was closed after its environment failed: {failure.message}"
            self._close(session, message, "worker_lost" if failure.code == WorkerLost.code else "failed")
        error = protocol.error_class(failure.code)(failure.message)
        error.code, error.http_status = failure.code, failure.http_status
        raise error

    # ------------------------------------------------------------------ the operations

    def create(self, request: CreateSession, owner: bytes | None = None, key: str | None = None) -> dict[str, Any]:
        """Open a session; with an idempotency ``key`` a retry answers the session the first attempt opened."""
        if self.draining:
            raise ShuttingDown("the server is shutting down; open the session on another server")
        if request.env not in self.descriptions:
            raise UnknownEnv(
                f"no environment named {request.env!r} is served here; served: {sorted(self.descriptions)}"
            )
        for name in request.kwargs:
            if name in RESERVED_KWARGS:
                raise InvalidArgument(f'{name!r} is not a constructor keyword here; send "privileged" at the top level')
            if UNSAFE_KWARG.search(name):
                raise InvalidArgument(
                    f"the server does not take the keyword {name!r} from a request: keywords naming files, "
                    "commands or addresses are set by whoever runs the server"
                )
        key = check_key(key)
        return self._keys.create(owner, key, request, lambda: self._open(request, owner), self.config.setup_timeout_s)

    def _host(self, env: str) -> WorkerHandle | InlineHost:
        """Where the new session goes, counted there (call with the table's lock held)."""
        if len(self._table.sessions) + self._table.creating >= self.config.max_sessions:
            raise AtCapacity(
                f"the server holds its maximum of {self.config.max_sessions} sessions; retry after "
                f"{self.config.retry_after_s} s, close idle sessions, or use another server",
                retry_after=self.config.retry_after_s,
            )
        worker = self._pool.host_for(env)
        if worker is None:
            raise AtCapacity(
                "no worker process can take a session now (each is being replaced or not answering); retry after "
                f"{self.config.retry_after_s} s or use another server",
                retry_after=self.config.retry_after_s,
            )
        worker.sessions += 1
        self._table.creating += 1
        return worker

    def _open(self, request: CreateSession, owner: bytes | None) -> dict[str, Any]:
        with self._table.lock:
            worker = self._host(request.env)
        session_id = secrets.token_hex(16)
        session = Session(session_id, request.env, worker, owner, request.privileged, time.monotonic(), busy=True)
        try:
            future = worker.call("create", session_id, (request.env, request.kwargs, request.privileged))
            try:
                description = self._wait(session, future, "create", self.config.setup_timeout_s)
            except BaseException:
                self._table.closing(session)
                self._let_go(session)
                raise
            self._table.add(session)
        finally:
            with self._table.lock:
                self._table.creating -= 1
        self.metrics.inc("agentenvs_sessions_opened_total", (("env", request.env),))
        return {
            "session_id": session_id,
            "lease_ttl_s": self.config.lease_ttl_s,
            "step_timeout_s": self.config.step_timeout_s,
            "env": description,
        }

    def close(self, session_id: str, owner: bytes | None = None) -> None:
        """Close a session; closing one that is closed or unknown is not an error (DELETE is idempotent)."""
        session = self._table.owned(session_id, owner)
        if session is None:
            return
        self._close(session, f"session {session_id} is closed (DELETE); open a new one", "deleted")

    def _drive(self, session_id: str, owner: bytes | None, op: str, args: tuple, timeout: float | None = None) -> bytes:
        session = self._table.acquire(session_id, owner)
        try:
            future = session.worker.call(op, session.id, args)
            return _recorded(session, op, self._wait(session, future, op, timeout or self.config.step_timeout_s))
        finally:
            self._let_go(session)

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

    def runs_inline(self, session_id: str) -> bool:
        """Whether the session lives in the server process, so a call to it never waits on a worker."""
        session = self._table.sessions.get(session_id)
        return session is not None and session.worker is self._pool.inline

    def opens_inline(self, env: Any) -> bool:
        """Whether opening a session of ``env`` never waits on a worker (an inline env, or a bad or unserved name)."""
        return not isinstance(env, str) or env in self._pool.inline_envs or env not in self.descriptions

    def session_info(self, session_id: str, owner: bytes | None = None) -> dict[str, Any]:
        session = self._table.acquire(session_id, owner)
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
            self._let_go(session)

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
        session = self._table.acquire(session_id, owner)
        try:
            stored = self._stored_or_check(session, request.turn)
            if stored is not None:
                return stored
            future = session.worker.call("step", session.id, (request.action,))
            result = self._wait(session, future, "step", self.config.step_timeout_s)
            return self._record_step(session, request.turn, result)
        finally:
            self._let_go(session)

    def batch_step(
        self, items: list[BatchItem | BatchReset | AgentEnvsError], owner: bytes | None = None
    ) -> list[bytes]:
        """One answer per item, in order: a step's or a reset's answer, or ``{"error": ...}``.

        The steps on one worker go to it as one call. Resets go along in that call to the server process
        (an inline environment resets at once) but as a call each to a worker process, whose threads then
        run them side by side (an engine's reset may take seconds).
        """
        results: list[bytes | None] = [None] * len(items)
        held: list[Session] = []
        groups: dict[Any, list[tuple[int, Session, BatchItem | BatchReset]]] = {}
        for index, item in enumerate(items):
            try:
                if isinstance(item, AgentEnvsError):
                    raise item
                session = self._table.acquire(item.session_id, owner)
                held.append(session)
                key: Any = id(session.worker)
                if isinstance(item, BatchItem):
                    stored = self._stored_or_check(session, item.turn)
                    if stored is not None:
                        results[index] = stored
                        continue
                elif session.worker is not self._pool.inline:
                    key = ("reset", index)
                groups.setdefault(key, []).append((index, session, item))
            except AgentEnvsError as exc:
                results[index] = _error_item(exc, self.metrics)
        try:
            self._run_batch(list(groups.values()), results)
        finally:
            for session in held:
                self._let_go(session)
        return [r if r is not None else b"null" for r in results]

    def _run_batch(self, groups: list[list[tuple[int, Session, Any]]], results: list[bytes | None]) -> None:
        """Send every group as one worker call, all at once, and put their answers in ``results``.

        A group with a reset has the setup time limit, one of steps only the step time limit."""
        started = time.monotonic()
        calls = []
        for group in groups:
            resets = any(isinstance(item, BatchReset) for _, _, item in group)
            timeout = self.config.setup_timeout_s if resets else self.config.step_timeout_s
            work = [(s.id, "reset", (it.request.seed, it.request.options)) if isinstance(it, BatchReset)
                    else (s.id, "step", (it.action,)) for _, s, it in group]  # fmt: skip
            calls.append((group, timeout, group[0][1].worker.call("batch", None, work)))
        for group, timeout, future in calls:
            try:
                answers = future.result(max(0.0, started + timeout - time.monotonic())).payload
            except FutureTimeout:
                answers = [None] * len(group)
            except WorkerLost as exc:
                answers = [lost(str(exc))] * len(group)
            for (index, session, item), answer in zip(group, answers, strict=False):
                results[index] = self._batch_answer(session, item, answer, timeout, future)
            if answers[0] is None:  # one call, so one thread held, for the whole group
                self._pool.count_overdue(group[0][1].worker, future)

    def _batch_answer(
        self, session: Session, item: BatchItem | BatchReset, answer: Outcome | None, timeout: float, future: Future
    ) -> bytes:
        reset = isinstance(item, BatchReset)
        try:
            if answer is None:
                raise self._timed_out(session, "reset" if reset else "step", timeout, future)
            result: Result = self._unpack(session, answer)
            return _recorded(session, "reset", result) if reset else self._record_step(session, item.turn, result)
        except AgentEnvsError as exc:
            return _error_item(exc, self.metrics)

    # ------------------------------------------------------------------ what /healthz and /metrics show

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` answer: ok, degraded (every worker dead or being replaced) or draining."""
        workers = self._pool.stats()
        alive = sum(w["alive"] for w in workers)
        suspect = sum(w["alive"] and w["suspect"] for w in workers)
        status = "draining" if self.draining else ("ok" if alive > suspect else "degraded")
        return {
            "status": status,
            "protocol": protocol.PROTOCOL_VERSION,
            "sessions": sum(self._table.by_env().values()),
            "workers_alive": alive,
            "workers_suspect": suspect,
            "calls_overdue": sum(w["overdue"] for w in workers if w["alive"]),
        }

    def readiness(self) -> dict[str, Any]:
        """The ``/readyz`` answer: ready when a session of every served environment can be opened now."""
        ready_workers = sum(w["ready"] for w in self._pool.stats())
        needs_workers = any(name not in self._pool.inline_envs for name in self.config.envs)
        ready = not self.draining and (ready_workers > 0 or not needs_workers)
        status = "draining" if self.draining else ("ok" if ready else "degraded")
        return {"ready": ready, "status": status, "workers_ready": ready_workers}

    def render_metrics(self, in_flight: Any = None) -> str:
        """The ``/metrics`` text: the counters and histograms, with the session and worker gauges of now."""
        workers = [w for w in self._pool.stats() if w["alive"]]

        def total(stat: str) -> dict[tuple, float]:
            return {(): float(sum(w[stat] for w in workers))}

        gauges = {
            "agentenvs_sessions_active": {(("env", e),): float(n) for e, n in self._table.by_env().items()},
            "agentenvs_workers_alive": {(): float(len(workers))},
            "agentenvs_workers_suspect": total("suspect"),
            "agentenvs_workers_ready": total("ready"),
            "agentenvs_worker_sessions": total("sessions"),
            "agentenvs_calls_in_flight": total("in_flight"),
            "agentenvs_calls_overdue": total("overdue"),
        }
        if in_flight is not None:
            gauges["agentenvs_requests_in_flight"] = {(): float(in_flight.count)}
        return self.metrics.render(gauges)

    def stats(self) -> dict[str, Any]:
        by_env = self._table.by_env()
        return {"sessions": sum(by_env.values()), "sessions_by_env": by_env, "workers": self._pool.stats()}


def _inline(name: str) -> bool:
    """Whether ``name`` declares itself cheap and safe (an unknown name fails later, when it is described)."""
    import agentenvs

    try:
        return agentenvs.registry.spec(name).inline
    except AgentEnvsError:
        return False


def _recorded(session: Session, op: str, result: Result) -> bytes:
    """The answer of a call other than a step, after taking in the session's turn and done flag (a reset or
    a restored state also forgets the stored step answer)."""
    session.turn, session.done = result.turn, result.done
    if op in ("reset", "set_state"):
        session.last_step = None
    return result.body


def _error_item(exc: AgentEnvsError, metrics: Metrics) -> bytes:
    metrics.inc("agentenvs_errors_total", (("code", exc.code),))
    return protocol.dumps(protocol.error_body(exc.code, str(exc)))

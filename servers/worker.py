"""Worker processes that hold the environment instances, so a slow or crashing engine never touches the server.

The server talks to each worker over one ``multiprocessing`` pipe: :class:`~agentenvs.servers.messages.Call`
messages go in, :class:`~agentenvs.servers.messages.Reply` messages come back in any order. Inside the worker a small
pool of threads runs the calls, so one slow step does not hold up the other sessions pinned to that worker.
Answers are encoded to JSON here, in the worker, which keeps that CPU work off the HTTP process.

A second pipe carries heartbeats, answered by a thread of their own: a worker whose call threads are all busy
still answers, and one that cannot (stopped, or an engine holding the GIL in C code) is found by
``servers/pool.py``. Each worker leads its own process group, so replacing it also ends what it started (a JVM,
a shell) even when that is stopped or wedged too.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError, EnvFailed, InvalidArgument
from agentenvs.protocol import WorkerLost
from agentenvs.servers.messages import Call, Failure, Outcome, Reply, Result


def failed(message: str) -> Outcome:
    """The outcome of a call on a session its worker does not hold: ``env_failed``, closing the session."""
    return Outcome(False, Failure(EnvFailed.code, EnvFailed.http_status, message, True))


def lost(message: str) -> Outcome:
    """The outcome of a call whose worker died or was replaced: ``worker_lost``, closing the session."""
    return Outcome(False, Failure(WorkerLost.code, WorkerLost.http_status, message, True))


def _failure(exc: BaseException, what: str) -> Outcome:
    if isinstance(exc, AgentEnvsError):
        return Outcome(False, Failure(exc.code, exc.http_status, str(exc), False))
    return failed(f"the environment raised {type(exc).__name__} in {what}: {str(exc)[:500]}; the session is closed")


class EnvHost:
    """The environments of one worker process and the operations the server may ask of them."""

    def __init__(self) -> None:
        self.envs: dict[str, Any] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.guard = threading.Lock()

    def lock(self, session_id: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(session_id, threading.Lock())

    def handle(self, op: str, session_id: str | None, args: tuple) -> Outcome:
        if op == "describe_env":
            return self._guarded(lambda: self._describe_env(*args), "describe")
        if op == "ping":
            return Outcome(True, "pong")
        if op == "batch":  # items (session_id, op, args): steps and resets of one batch, in order
            return Outcome(True, [self.handle(item_op, sid, item_args) for sid, item_op, item_args in args])
        assert session_id is not None
        with self.lock(session_id):
            if op == "create":
                return self._guarded(lambda: self._create(session_id, *args), "the constructor")
            if op == "close":
                self.close(session_id)
                return Outcome(True, None)
            env = self.envs.get(session_id)
            if env is None:
                return failed("the session is not held by this worker")
            outcome = self._guarded(lambda: self._call(env, op, args), op)
            if not outcome.ok and outcome.payload.fatal:
                self.close(session_id)
            return outcome

    @staticmethod
    def _guarded(call: Callable[[], Any], what: str) -> Outcome:
        try:
            return Outcome(True, call())
        except BaseException as exc:
            return _failure(exc, what)

    def _describe_env(self, name: str) -> dict[str, Any]:
        """The environment's description and its task ids by split (building it checks it can be served)."""
        import agentenvs

        env = agentenvs.make(name)
        try:
            task_ids = {split: [task["task_id"] for task in env.tasks(split)] for split in env.splits()}
            return {"description": env.describe(), "task_ids": task_ids}
        finally:
            env.close()

    def _create(self, session_id: str, name: str, kwargs: dict[str, Any], privileged: bool) -> dict[str, Any]:
        import agentenvs

        try:
            env = agentenvs.make(name, **kwargs, privileged=privileged)
        except TypeError as exc:
            raise InvalidArgument(f"{name} does not accept these keywords: {exc}") from None
        self.envs[session_id] = env
        return env.describe()

    def close(self, session_id: str) -> None:
        env = self.envs.pop(session_id, None)
        with self.guard:
            self.locks.pop(session_id, None)
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()

    @staticmethod
    def _call(env: Any, op: str, args: tuple) -> Result:
        return Result(protocol.dumps(EnvHost._answer(env, op, args)), env.turn, env.done)

    @staticmethod
    def _answer(env: Any, op: str, args: tuple) -> Any:
        if op == "step":
            return protocol.step_answer(*env.step(*args))
        if op == "reset":
            seed, options = args
            observation, info = env.reset(seed=seed, options=options)
            return {"observation": observation, "info": info}
        if op == "set_state":
            observation, info = env.set_state(*args)
            return {"observation": observation, "info": info}
        if op == "get_state":
            return {"state": env.get_state()}
        if op == "describe":
            return env.describe()
        if op == "extract_action":
            found = env.extract_action(*args)
            return {
                "extracted": None if found is None else {"action": found.action, "start": found.start, "end": found.end}
            }
        raise InvalidArgument(f"unknown worker operation {op!r}")


def answer_heartbeats(beat: Any) -> None:
    """Answer every heartbeat until the server closes the pipe (a thread of its own, so busy call threads do not
    delay it: only a stopped process or one whose GIL is held for good stays silent)."""
    while True:
        try:
            beat.send(beat.recv())
        except (EOFError, OSError):
            return


def worker_main(conn: Any, beat: Any, entry_points: dict[str, str], threads: int) -> None:
    """The loop of one worker process; it ends when the server closes the pipe or dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own process group: replacing the worker kills what it started with it
    threading.Thread(target=answer_heartbeats, args=(beat,), name="heartbeat", daemon=True).start()
    import agentenvs

    for name, entry_point in entry_points.items():
        agentenvs.register(name, entry_point, overwrite=True)
    host = EnvHost()
    send_lock, receive_lock = threading.Lock(), threading.Lock()
    stop = threading.Event()

    def serve() -> None:
        # Leader/follower: the thread that receives a call also runs it, so no hand-off between threads;
        # while it runs, the next idle thread is already waiting on the pipe.
        while not stop.is_set():
            with receive_lock:
                if stop.is_set():
                    return
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    message = None
                if message is None:
                    stop.set()
                    return
            call: Call = message
            outcome = host.handle(call.op, call.session_id, call.args)
            with send_lock, contextlib.suppress(OSError, ValueError):
                conn.send(Reply(call.request_id, outcome))

    pool = [threading.Thread(target=serve, name=f"env-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    stop.wait()
    for session_id in list(host.envs):
        host.close(session_id)


class WorkerHandle:
    """The server's end of one worker process: calls and their futures, heartbeats, its overdue calls, killing it."""

    _ids = itertools.count(1)

    def __init__(
        self, index: int, entry_points: dict[str, str], threads: int, on_death: Callable[[WorkerHandle], None]
    ):
        context = multiprocessing.get_context("spawn")
        self.index, self.threads = index, threads
        self.conn, child = context.Pipe()
        self.beat, beat_child = context.Pipe()
        self.process = context.Process(
            target=worker_main,
            args=(child, beat_child, entry_points, threads),
            name=f"agentenvs-worker-{index}",
            daemon=True,
        )
        self.process.start()
        child.close()
        beat_child.close()
        self.alive = True
        self.sessions = 0
        """Sessions pinned here, counting closed ones whose environment a call past its limit still holds."""
        self.overdue = 0
        """Calls that ran past their time limit and have not returned: each holds one of the worker's threads."""
        self.suspect: str | None = None
        """Why the worker is being replaced (it takes no new sessions); None while it is trusted."""
        self.ready = False
        """It has answered a heartbeat (so it has started)."""
        self.late = False
        """Its last heartbeat went unanswered for a probe interval: no new sessions until it answers."""
        self.stopping = False
        self._ping_sent: float | None = None
        self._pending: dict[int, tuple[Future, float]] = {}
        """Calls sent and not answered, oldest first: their futures and when they were sent."""
        self._lock = threading.Lock()
        self._on_death = on_death
        self._reader = threading.Thread(target=self._read, name=f"worker-{index}-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def in_flight(self) -> int:
        """Calls sent to this worker and not yet answered."""
        with self._lock:
            return len(self._pending)

    def busy_for(self, now: float) -> float:
        """How long the oldest unanswered call has run (0 with none): a worker busy for long may be hung."""
        with self._lock:
            oldest = next(iter(self._pending.values()), None)
        return 0.0 if oldest is None else now - oldest[1]

    @property
    def takes_sessions(self) -> bool:
        """Alive, trusted, and answering its heartbeats."""
        return self.alive and self.suspect is None and not self.late

    def call(self, op: str, session_id: str | None, args: tuple = ()) -> Future:
        future: Future = Future()
        with self._lock:
            if not self.alive:
                future.set_exception(WorkerLost(self.death_message()))
                return future
            request_id = next(self._ids)
            self._pending[request_id] = (future, time.monotonic())
            try:
                self.conn.send(Call(request_id, op, session_id, args))
            except (OSError, ValueError):
                self._pending.pop(request_id, None)
                future.set_exception(WorkerLost(self.death_message()))
        return future

    def heartbeat(self, now: float) -> float:
        """Take the heartbeat answers that came and send the next heartbeat once the last is answered; how long
        the unanswered one has waited (0 when every heartbeat is answered). Called by one thread at a time."""
        try:
            while self.beat.poll():
                self.beat.recv()
                self._ping_sent = None
                self.ready = True
            if self._ping_sent is None:
                self.beat.send(b"")
                self._ping_sent = now
                return 0.0
        except (EOFError, OSError, ValueError):
            return 0.0  # it died: the reader thread reports that
        return now - self._ping_sent

    def count_overdue(self, future: Future) -> int:
        """Count ``future``'s call as overdue until it returns (or the worker dies); the overdue calls now."""
        with self._lock:
            self.overdue += 1
            count = self.overdue
        future.add_done_callback(self._overdue_returned)
        return count

    def _overdue_returned(self, _: Future) -> None:
        with self._lock:
            self.overdue -= 1

    def kill(self, reason: str) -> None:
        """Mark the worker suspect and kill it with everything it started; its reader thread then reports the death."""
        self.suspect = self.suspect or reason
        self._kill_group()
        with contextlib.suppress(OSError):
            self.process.kill()

    def _kill_group(self) -> None:
        """SIGKILL the worker's process group: the worker and what it started (a stopped JVM never reads the pipe
        whose closing would end it). Called only before the worker is reaped, so its pid is not someone else's."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def death_message(self) -> str:
        if self.suspect is not None:
            return (
                f"the worker process running this session (pid {self.pid}) was replaced because {self.suspect}; "
                "the session is closed: open a new one"
            )
        return (
            f"the worker process running this session died (pid {self.pid}, exit code {self.process.exitcode}); "
            "the session is closed: open a new one"
        )

    def _read(self) -> None:
        while True:
            try:
                reply: Reply = self.conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                call = self._pending.pop(reply.request_id, None)
            if call is not None:
                call[0].set_result(reply.outcome)
        if not self.stopping:
            self._kill_group()
        self.process.join(timeout=5)
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
        message = self.death_message()
        for future, _ in pending.values():
            future.set_exception(WorkerLost(message))
        self._on_death(self)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to close its environments and exit; kill it (and what it started) if it does not."""
        self.stopping = True
        with self._lock, contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(timeout)
        if self.process.is_alive():
            self._kill_group()
            self.process.kill()
            self.process.join(2)

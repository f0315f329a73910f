"""Worker processes that hold the environment instances, so a slow or crashing engine never touches the server.

The server talks to each worker over one ``multiprocessing`` pipe: :class:`~agentenvs.servers.messages.Call`
messages go in, :class:`~agentenvs.servers.messages.Reply` messages come back in any order. Inside the worker a small
pool of threads runs the calls, so one slow step does not hold up the other sessions pinned to that worker.
Answers are encoded to JSON here, in the worker, which keeps that CPU work off the HTTP process.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError, EnvFailed, InvalidArgument
from agentenvs.servers.messages import Call, Failure, Outcome, Reply, Result


def failed(message: str) -> Outcome:
    """The outcome of a call whose worker died or lost the session: ``env_failed``, closing the session."""
    return Outcome(False, Failure(EnvFailed.code, EnvFailed.http_status, message, True))


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


def worker_main(conn: Any, entry_points: dict[str, str], threads: int) -> None:
    """The loop of one worker process; it ends when the server closes the pipe or dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
    """The server's end of one worker process: send a call, get a future for its answer."""

    _ids = itertools.count(1)

    def __init__(
        self, index: int, entry_points: dict[str, str], threads: int, on_death: Callable[[WorkerHandle], None]
    ):
        context = multiprocessing.get_context("spawn")
        self.index = index
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=worker_main, args=(child, entry_points, threads), name=f"agentenvs-worker-{index}", daemon=True
        )
        self.process.start()
        child.close()
        self.alive = True
        self.sessions = 0
        self._pending: dict[int, Future] = {}
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

    def call(self, op: str, session_id: str | None, args: tuple = ()) -> Future:
        future: Future = Future()
        with self._lock:
            if not self.alive:
                future.set_exception(EnvFailed(self.death_message()))
                return future
            request_id = next(self._ids)
            self._pending[request_id] = future
            try:
                self.conn.send(Call(request_id, op, session_id, args))
            except (OSError, ValueError):
                self._pending.pop(request_id, None)
                future.set_exception(EnvFailed(self.death_message()))
        return future

    def death_message(self) -> str:
        code = self.process.exitcode
        return (
            f"the worker process running this session died (pid {self.pid}, exit code {code}); "
            "the session is closed: open a new one"
        )

    def _read(self) -> None:
        while True:
            try:
                reply: Reply = self.conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._pending.pop(reply.request_id, None)
            if future is not None:
                future.set_result(reply.outcome)
        self.process.join(timeout=5)
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
        message = self.death_message()
        for future in pending.values():
            future.set_exception(EnvFailed(message))
        self._on_death(self)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to close its environments and exit; kill it if it does not."""
        with self._lock, contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2)

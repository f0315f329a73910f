"""The lifecycle of one ScienceWorld JVM: start with a memory cap, detect death, close, leave no orphans.

ScienceWorld's engine is a Scala program driven over py4j. Each environment owns one JVM, which it
reuses across resets. Three mechanisms keep a JVM from outliving its owner:

- py4j's ``--die-on-broken-pipe``: the JVM reads its stdin and exits when the pipe closes, which the
  kernel does when the owning Python process exits for any reason (even ``kill -9``);
- a fork hook: a child forked after the JVM started (a server worker, ``multiprocessing``) closes
  its inherited copy of that pipe, so the pipe still closes when the real owner dies;
- ``close()`` (also from ``atexit`` and the owner's garbage collection) closes the pipe, waits, and kills.

``find_orphan_jvms()`` is the check: ScienceWorld JVMs whose parent is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import time
import weakref
from collections import deque
from typing import Any

from agentenvs.errors import EnvFailed, MissingDependency

GATEWAY_CLASS = "py4j.GatewayServer"
JAR_NAME = "scienceworld.jar"

DEFAULT_HEAP_MB = 256
"""``-Xmx``. A world needs about 25 MB of live heap, but the serial collector lets the heap fill up to
its cap before a full collection, so the cap sets the resident memory: with 384 MB (envs.md §3) the
JVM grew to about 490 MB over a long run; 256 MB keeps it well under 450 MB."""

DETERMINISTIC_OPTS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
"""ScienceWorld keeps a room's objects in hash sets keyed by identity hash codes, so by default the
order in which ``look around`` lists them changes from one load to the next. A constant identity
hash makes that order (and every observation) the same in every load and every process; the cost is
measured in ``bench/bench_sciworld.py``."""

CLOSE_TIMEOUT_S = 5.0

_LIVE: weakref.WeakSet[ScienceWorldJVM] = weakref.WeakSet()


def java_options(heap_mb: int = DEFAULT_HEAP_MB, deterministic: bool = True) -> list[str]:
    """The JVM flags: a heap cap, the serial collector (less memory than G1 for a small heap), exit on OOM."""
    options = [f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError"]
    if deterministic:
        options += DETERMINISTIC_OPTS
    return options


class ScienceWorldJVM:
    """One JVM with ScienceWorld's ``PythonInterface``; :meth:`call` turns engine trouble into ``EnvFailed``."""

    def __init__(self, heap_mb: int = DEFAULT_HEAP_MB, deterministic: bool = True):
        self.heap_mb = heap_mb
        self.deterministic = deterministic
        self.process: subprocess.Popen | None = None
        self._gateway: Any = None
        self._server: Any = None
        self._stderr: deque[str] = deque(maxlen=40)
        self.starts = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Launch the JVM (about 2 s) and connect to it; a running one is left alone."""
        if self.alive:
            return
        self.close()
        try:
            from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
            from scienceworld.constants import BASEPATH, JAR_PATH
        except ImportError as exc:
            raise MissingDependency(
                "ScienceWorld needs its engine: pip install 'agentenvs[sciworld]' (and a Java runtime: "
                "`make install` or `apt-get install default-jre-headless`)"
            ) from exc
        self._stderr.clear()
        try:
            port, process = launch_gateway(
                classpath=JAR_PATH,
                javaopts=java_options(self.heap_mb, self.deterministic),
                die_on_exit=True,
                cwd=BASEPATH,
                return_proc=True,
                redirect_stderr=self._stderr,
            )
        except FileNotFoundError as exc:
            raise MissingDependency(
                "no `java` on PATH: ScienceWorld needs a Java runtime (>= 8); run `make install` or "
                "`apt-get install default-jre-headless`"
            ) from exc
        except (ValueError, OSError) as exc:
            raise EnvFailed(f"the ScienceWorld JVM did not start: {exc}; JVM said: {self.stderr_tail()}") from exc
        self.process = process
        self._gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_field=True))
        self._server = self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
        self.starts += 1
        _LIVE.add(self)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and self._server is not None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def close(self) -> None:
        """Disconnect and end the JVM: close its stdin (it exits on the broken pipe), then kill if it lingers."""
        gateway, process = self._gateway, self.process
        self._gateway = self._server = self.process = None
        _LIVE.discard(self)
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.close()
            _mark_disconnected(gateway)
        if process is None:
            return
        with contextlib.suppress(Exception):
            process.stdin.close()
        try:
            process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=CLOSE_TIMEOUT_S)

    def stderr_tail(self) -> str:
        return " | ".join(line.strip() for line in list(self._stderr)[-5:]) or "(nothing)"

    # ------------------------------------------------------------------ calls

    def call(self, method: str, *args: Any) -> Any:
        """Call ``PythonInterface.<method>(*args)``; a dead JVM or a Java exception raises ``EnvFailed``."""
        from py4j.protocol import Py4JError, Py4JJavaError

        if not self.alive:
            raise EnvFailed(self._death_message() + "; call reset() to start a new one")
        try:
            return getattr(self._server, method)(*args)
        except Py4JJavaError as exc:
            raise EnvFailed(f"ScienceWorld raised in {method}: {exc.java_exception}") from exc
        except Py4JError as exc:
            message = self._death_message()
            self.close()
            raise EnvFailed(f"{message} during {method}; call reset() to start a new one") from exc

    def _death_message(self) -> str:
        if self.process is None:
            return "the ScienceWorld JVM is not running"
        code = self.process.poll()
        state = f"exited with code {code}" if code is not None else "stopped answering"
        return f"the ScienceWorld JVM (pid {self.process.pid}) {state}; JVM said: {self.stderr_tail()}"

    # ------------------------------------------------------------------ memory

    def rss_mb(self) -> float | None:
        """Resident memory of the JVM process in MB, or None when it is not running."""
        if not self.alive:
            return None
        import psutil

        try:
            return psutil.Process(self.process.pid).memory_info().rss / 2**20
        except psutil.Error:
            return None


def _mark_disconnected(gateway: Any) -> None:
    """Stop py4j from contacting this JVM again.

    ``JavaGateway.close()`` only closes sockets and keeps the client "connected". So every Java
    object still alive would try to reconnect when it is garbage collected, to free itself on a
    JVM that is gone. Each try logs a refused connection with its traceback, from inside the
    garbage collector. On Python 3.11 formatting that traceback parses source, and a parse nested in
    another one (pytest rewriting an import) fails with "AST constructor recursion depth mismatch".
    A disconnected client skips those frees.
    """
    gateway._gateway_client.is_connected = False


def python_rss_mb() -> float:
    """Resident memory of this Python process in MB."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def is_sciworld_jvm(cmdline: list[str]) -> bool:
    return any(part == GATEWAY_CLASS for part in cmdline) and any(JAR_NAME in part for part in cmdline)


def find_orphan_jvms(grace_s: float = 0.0) -> list[int]:
    """Pids of ScienceWorld JVMs whose parent process is gone (re-parented to init or a subreaper).

    A JVM is an orphan when its parent is not a Python process any more; ``grace_s`` skips JVMs
    younger than that, which may still be shutting down.
    """
    import psutil

    orphans = []
    now = time.time()
    for process in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            if not is_sciworld_jvm(process.info["cmdline"] or []):
                continue
            if now - process.info["create_time"] < grace_s:
                continue
            parent = process.parent()
            if parent is None or parent.pid == 1 or "python" not in (parent.name() or "").lower():
                orphans.append(process.pid)
        except psutil.Error:
            continue
    return orphans


def _close_inherited_pipes() -> None:
    """In a forked child: drop the copies of the parents' JVM stdin pipes, which the child does not own."""
    for jvm in list(_LIVE):
        process = jvm.process
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if jvm._gateway is not None:  # its sockets are the parent's: frees sent on them would reach the parent's JVM
            _mark_disconnected(jvm._gateway)
        jvm._gateway = jvm._server = jvm.process = None
    _LIVE.clear()


def _close_all() -> None:
    for jvm in list(_LIVE):
        jvm.close()


os.register_at_fork(after_in_child=_close_inherited_pipes)
atexit.register(_close_all)

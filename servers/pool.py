"""The worker processes of a server: started, watched, replaced when one dies or is suspect; and the inline host
for the environments that declare themselves cheap and safe.

A worker is **suspect** when it misses its heartbeats (stopped, or an engine holding the GIL in C code) or when
every one of its threads is held by a call that ran past its time limit (a JVM call over py4j, a socket read
that never returns). A suspect worker takes no new sessions and is killed at once, with what it started; its
sessions fail with ``worker_lost`` as those of a worker that died, and a fresh worker takes its place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from agentenvs.servers.inline import InlineHost
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.worker import WorkerHandle

STARTUP_S = 60.0
"""How long a new worker may take to answer its first heartbeat (it imports the environments' modules first)."""

log = logging.getLogger("agentenvs.servers")


@dataclass(frozen=True)
class Probing:
    """How the pool watches its workers (``agentenvs serve --probe-interval/--probe-timeout``)."""

    interval_s: float = 1.0
    """A heartbeat goes to every worker this often; one unanswered for an interval keeps new sessions away."""
    timeout_s: float = 10.0
    """A worker silent this long is suspect and replaced."""


class WorkerPool:
    """``count`` workers; ``on_death(worker)`` runs when one dies, before its replacement is started."""

    def __init__(
        self,
        count: int,
        entry_points: dict[str, str],
        threads: int,
        metrics: Metrics,
        on_death: Callable[[WorkerHandle], None],
        inline_envs: frozenset[str] = frozenset(),
        probing: Probing = Probing(),
    ):
        self.count, self.entry_points, self.threads = count, entry_points, threads
        self.metrics, self.probing = metrics, probing
        self.workers: list[WorkerHandle] = []
        self.inline_envs = inline_envs
        self.inline = InlineHost()
        self.stopping = threading.Event()
        self._on_death = on_death
        self._lock = threading.Lock()
        self._watchdog = threading.Thread(target=self._watch, name="worker-watchdog", daemon=True)

    def start(self) -> None:
        """Start the workers, wait until each answered a heartbeat (at most STARTUP_S), then start the watchdog."""
        self.workers = [self._spawn(i) for i in range(self.count)]
        deadline = time.monotonic() + STARTUP_S
        while not all(w.ready for w in self.workers) and time.monotonic() < deadline:
            for worker in self.workers:
                worker.heartbeat(time.monotonic())
            time.sleep(0.01)
        self._watchdog.start()

    def _spawn(self, index: int) -> WorkerHandle:
        return WorkerHandle(index, self.entry_points, self.threads, self._died)

    def _died(self, worker: WorkerHandle) -> None:
        if self.stopping.is_set():
            return
        self._on_death(worker)
        self.metrics.inc("agentenvs_worker_restarts_total")
        self.workers[worker.index] = self._spawn(worker.index)

    def _watch(self) -> None:
        """Heartbeats: a worker silent past the timeout (STARTUP_S before its first answer) is replaced."""
        while not self.stopping.wait(self.probing.interval_s):
            now = time.monotonic()
            for worker in list(self.workers):
                if not worker.alive or worker.suspect is not None:
                    continue
                silent = worker.heartbeat(now)
                worker.late = silent > 0  # unanswered for an interval: no new sessions until it answers
                limit = self.probing.timeout_s if worker.ready else max(self.probing.timeout_s, STARTUP_S)
                if silent > limit:
                    self.replace(worker, f"it answered no heartbeat for {silent:.1f} s", "heartbeat")

    def count_overdue(self, worker: WorkerHandle | InlineHost, future: Future) -> None:
        """A call on ``worker`` ran past its limit: it holds a thread until it returns, and a worker whose every
        thread is held so is replaced."""
        if not isinstance(worker, WorkerHandle):
            return
        if worker.count_overdue(future) >= self.threads and worker.alive and worker.suspect is None:
            self.replace(worker, f"all {self.threads} of its threads are held by calls past their time limit", "stuck")

    def replace(self, worker: WorkerHandle, reason: str, label: str) -> None:
        """Mark ``worker`` suspect and kill it; its sessions fail with ``worker_lost`` and a new worker starts."""
        with self._lock:
            if worker.suspect is not None:
                return
            worker.suspect = reason
        log.warning("replacing worker pid %s: %s", worker.pid, reason)
        self.metrics.inc("agentenvs_workers_killed_total", (("reason", label),))
        worker.kill(reason)

    def host_for(self, env: str) -> WorkerHandle | InlineHost | None:
        """Where a new session of ``env`` lives: the inline host, or the trusted worker with the fewest sessions,
        preferring one with a free thread, then one answering its heartbeats, then one that has started, and of
        workers with every thread busy the one whose oldest call is youngest (the oldest may be hung). None when
        every worker is dead or being replaced (call with the session table's lock held)."""
        if env in self.inline_envs:
            return self.inline
        trusted = [w for w in self.workers if w.alive and w.suspect is None]
        if not trusted:
            return None
        now = time.monotonic()

        def preference(worker: WorkerHandle) -> tuple:
            full = worker.in_flight >= self.threads
            return full, worker.late, not worker.ready, worker.busy_for(now) if full else 0.0, worker.sessions

        return min(trusted, key=preference)

    def stop(self) -> None:
        self.stopping.set()
        self.inline.stop()
        for worker in self.workers:
            worker.stop()

    def stats(self) -> list[dict[str, Any]]:
        return [
            {
                "index": w.index,
                "pid": w.pid,
                "alive": w.alive,
                "suspect": w.suspect is not None,
                "ready": w.ready and w.takes_sessions,
                "sessions": w.sessions,
                "in_flight": w.in_flight,
                "overdue": w.overdue,
            }
            for w in self.workers
        ]

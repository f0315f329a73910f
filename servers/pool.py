"""The worker processes of a server (started, replaced when one dies, killed when one is wedged), and the inline
host for the environments that declare themselves cheap and safe."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from agentenvs.errors import EnvFailed
from agentenvs.servers.inline import InlineHost
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.worker import WorkerHandle

PROBE_TIMEOUT_S = 5.0
"""How long a worker with a free thread may take to answer a ping after one of its calls timed out."""

log = logging.getLogger("agentenvs.servers")


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
    ):
        self.count, self.entry_points, self.threads = count, entry_points, threads
        self.metrics = metrics
        self.workers: list[WorkerHandle] = []
        self.inline_envs = inline_envs
        self.inline = InlineHost()
        self.stopping = threading.Event()
        self._on_death = on_death

    def start(self) -> None:
        self.workers = [self._spawn(i) for i in range(self.count)]

    def _spawn(self, index: int) -> WorkerHandle:
        return WorkerHandle(index, self.entry_points, self.threads, self._died)

    def _died(self, worker: WorkerHandle) -> None:
        if self.stopping.is_set():
            return
        self._on_death(worker)
        self.metrics.inc("agentenvs_worker_restarts_total")
        self.workers[worker.index] = self._spawn(worker.index)

    def host_for(self, env: str) -> WorkerHandle | InlineHost:
        """Where a new session of ``env`` lives: the inline host, or the live worker with the fewest sessions
        (call with the session table's lock held)."""
        if env in self.inline_envs:
            return self.inline
        live = [w for w in self.workers if w.alive]
        if not live:
            raise EnvFailed("no worker process is alive; the server is replacing them, retry in a few seconds")
        return min(live, key=lambda w: w.sessions)

    def probe(self, worker: WorkerHandle) -> None:
        """After a timeout: a worker with a free thread that cannot answer a ping is wedged (an engine holding
        the GIL in C code); kill it, so its sessions fail and a fresh worker takes new ones instead of it
        swallowing every session pinned to it."""
        if worker.in_flight >= self.threads:
            return
        try:
            worker.call("ping", None).result(PROBE_TIMEOUT_S)
        except FutureTimeout:
            log.warning("worker pid %s did not answer a ping within %s s; killing it", worker.pid, PROBE_TIMEOUT_S)
            self.metrics.inc("agentenvs_workers_killed_total")
            worker.process.kill()
        except EnvFailed:
            pass

    def stop(self) -> None:
        self.stopping.set()
        self.inline.stop()
        for worker in self.workers:
            worker.stop()

    def stats(self) -> list[dict[str, Any]]:
        return [{"index": w.index, "pid": w.pid, "alive": w.alive, "sessions": w.sessions} for w in self.workers]

"""The host of the environments that declare themselves cheap and safe (``EnvSpec.inline``): in the server process.

A step of such an environment costs less than the trip to a worker process and back (two context switches and
two pickles), so the server runs it in the thread that serves the request. It answers the same calls as
:class:`~agentenvs.servers.worker.WorkerHandle`, through the same :class:`~agentenvs.servers.worker.EnvHost`,
so sessions, leases, idempotent turns, limits and metrics are the same; what an inline environment gives up
is the step time limit and crash isolation, which is why only environments that cannot hang or crash
declare it, and why ``agentenvs serve --isolate`` puts every environment in worker processes.
"""

from __future__ import annotations

import os
from concurrent.futures import Future

from agentenvs.servers.worker import EnvHost


class InlineHost:
    """Runs calls at once in the calling thread; every answer is an already completed future."""

    index = None
    """Sessions here report no worker index (``GET /v1/sessions/<id>``: ``"worker": null``)."""
    alive = True
    in_flight = 0

    def __init__(self) -> None:
        self.host = EnvHost()
        self.sessions = 0

    @property
    def pid(self) -> int:
        return os.getpid()

    def call(self, op: str, session_id: str | None, args: tuple = ()) -> Future:
        future: Future = Future()
        future.set_result(self.host.handle(op, session_id, args))
        return future

    def death_message(self) -> str:
        return "the server process holds this session"

    def stop(self) -> None:
        for session_id in list(self.host.envs):
            self.host.close(session_id)

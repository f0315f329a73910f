"""Cross-request batching for a retriever: concurrent requests' queries are searched together.

Handler threads :meth:`Coalescer.submit` their queries and wait; one searcher thread takes every
waiting request (up to ``max_batch`` queries) and searches them in one call (one encoder pass, one
Anserini ``batch_search``). While requests that have arrived are still being parsed, the batch waits
for them, at most ``max_wait_s``; with nothing on its way it goes at once, so a lone client pays no wait.
Admission is bounded: a request that would put more than ``max_pending`` queries in the queue is refused at once
(:class:`AtCapacity`, a 429 on the wire) instead of waiting without bound.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

from agentenvs.errors import AgentEnvsError
from agentenvs.retrieval.backends import Retriever
from agentenvs.retrieval.corpus import Hit


class AtCapacity(AgentEnvsError):
    """The queue is full; retry after the ``Retry-After`` seconds."""

    code = "at_capacity"
    http_status = 429


@dataclass
class Pending:
    queries: list[str]
    k: int
    done: threading.Event = field(default_factory=threading.Event)
    result: list[list[Hit]] | None = None
    error: BaseException | None = None


class Coalescer:
    def __init__(
        self, retriever: Retriever, *, max_batch: int = 64, max_wait_s: float = 0.003, max_pending: int = 2048
    ):
        self.retriever, self.max_batch, self.max_wait_s, self.max_pending = (
            retriever,
            max_batch,
            max_wait_s,
            max_pending,
        )
        self._queue: queue.Queue[Pending | None] = queue.Queue()
        self._pending = 0
        self._arriving = 0
        self._lock = threading.Lock()
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="retriever-batcher", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        return self._pending

    def submit(self, queries: list[str], k: int, timeout: float = 60.0) -> list[list[Hit]]:
        """Search ``queries`` in the next batch; call :meth:`arriving` first when the request came in."""
        with self._lock:
            self._arriving = max(0, self._arriving - 1)
            if self._pending + len(queries) > self.max_pending:
                raise AtCapacity(
                    f"{self._pending} queries are queued (the limit is {self.max_pending}); retry after a second"
                )
            self._pending += len(queries)
        job = Pending(queries, k)
        self._queue.put(job)
        if not job.done.wait(timeout):
            raise AtCapacity(f"the search did not finish within {timeout:g} s; retry later")
        if job.error is not None:
            raise job.error
        return job.result or []

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def arriving(self) -> None:
        """A request has come in and will submit once parsed: a forming batch may wait for it."""
        with self._lock:
            self._arriving += 1

    def departed(self) -> None:
        """An arrived request will not submit (it was refused while parsed)."""
        with self._lock:
            self._arriving = max(0, self._arriving - 1)

    def _take(self) -> list[Pending] | None:
        """The next batch: everything queued, plus (for at most ``max_wait_s``) the requests already arriving."""
        first = self._queue.get()
        if first is None:
            return None
        jobs, size = [first], len(first.queries)
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._arriving == 0:
                    break
                try:
                    job = self._queue.get(timeout=min(remaining, 0.0005))
                except queue.Empty:
                    continue
            if job is None:
                self._queue.put(None)
                break
            jobs.append(job)
            size += len(job.queries)
        return jobs

    def _run(self) -> None:
        while (jobs := self._take()) is not None:
            queries = [q for job in jobs for q in job.queries]
            k = max(job.k for job in jobs)
            try:
                found = self.retriever.search(queries, k)
                start = 0
                for job in jobs:
                    job.result = [hits[: job.k] for hits in found[start : start + len(job.queries)]]
                    start += len(job.queries)
            except Exception as exc:  # the requests fail; the searcher thread lives on
                for job in jobs:
                    job.error = exc
            with self._lock:
                self._pending -= len(queries)
                self.batches += 1
            for job in jobs:
                job.done.set()

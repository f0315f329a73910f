"""Client-side step batching: concurrent ``RemoteEnv.step`` calls on one server go as one batch call.

A rollout driver runs one thread per episode; each thread steps its own session. Sent one by one, every
step pays a full HTTP round trip and the server's per-request cost, so a driver reaches a small part of
what the server's ``POST /v1/batch/step`` can do. Here the steps that are waiting when a call can go are
sent together: a thread that finds a free slot (fewer than ``max_in_flight`` batches on the wire) takes
every queued step, its own included, sends them and hands each thread its answer; the others wait. A
lone step still goes at once on the single-step route, so nothing waits for company that is not coming,
and a step's answer, its errors and its retry safety (``turn``) are exactly those of ``RemoteEnv.step``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentenvs.client import Client, RemoteEnv

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


@dataclass
class _Queued:
    env: RemoteEnv
    action: Any
    result: StepResult | None = None
    error: BaseException | None = None
    batch: list[_Queued] | None = None
    """A batch this item's thread is asked to send (it is that batch's first item)."""
    woken: threading.Event = field(default_factory=threading.Event)


class StepBatcher:
    """Batches the concurrent steps of one :class:`Client`'s sessions (``Client(batch_steps=True)``).

    Every waiting thread sleeps on its own event and is woken once: with its answer, or with a batch to
    send (the first item of the next batch sends it), so no thread polls and no wake-up is wasted.
    """

    def __init__(self, client: Client, *, max_batch: int = 512, max_in_flight: int = 1):
        self.client = client
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self.batches = 0
        """Calls sent (a lone step counts as one): steps / batches is the mean batch size."""
        self.steps = 0
        self._queue: list[_Queued] = []
        self._in_flight = 0
        self._lock = threading.Lock()

    def step(self, env: RemoteEnv, action: Any) -> StepResult:
        """Step ``env``, in the same call as whatever other steps are waiting."""
        item = _Queued(env, action)
        with self._lock:
            self._queue.append(item)
            item.batch = self._take()
        if item.batch is None:
            item.woken.wait()
        while item.batch is not None:
            batch, item.batch = item.batch, None
            item.woken.clear()
            self._send(batch)
            self._hand_on()
            if item.result is None and item.error is None:
                item.woken.wait()
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _take(self) -> list[_Queued] | None:
        """The next batch when a slot is free (call with the lock held)."""
        if not self._queue or self._in_flight >= self.max_in_flight:
            return None
        batch = self._queue[: self.max_batch]
        del self._queue[: len(batch)]
        self._in_flight += 1
        return batch

    def _hand_on(self) -> None:
        """Free this batch's slot; the steps queued meanwhile go next, sent by the thread of the first."""
        with self._lock:
            self._in_flight -= 1
            batch = self._take()
        if batch is not None:
            batch[0].batch = batch
            batch[0].woken.set()

    def _send(self, batch: list[_Queued]) -> None:
        """One call for ``batch``; every item ends with its result or its own error."""
        try:
            if len(batch) == 1:
                batch[0].result = batch[0].env._step_alone(batch[0].action)
            else:
                answers = self.client.step_many([item.env for item in batch], [item.action for item in batch])
                for item, answer in zip(batch, answers, strict=True):
                    if isinstance(answer, BaseException):
                        item.error = answer
                    else:
                        item.result = answer
        except BaseException as exc:  # the whole call failed: every step in it fails with the same error
            for item in batch:
                if item.result is None and item.error is None:
                    item.error = exc
        finally:
            self.batches += 1
            self.steps += len(batch)
            for item in batch:
                item.woken.set()

    def stats(self) -> dict[str, float]:
        """Steps, calls and the mean batch size so far."""
        return {"steps": self.steps, "calls": self.batches, "mean_batch": self.steps / max(1, self.batches)}

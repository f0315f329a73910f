"""Hold off Python's full garbage collections while episodes are played in rounds.

A rollout keeps every step it records until it returns, so the heap grows all run, and each time the
objects that survived grow by a quarter CPython walks the whole heap: on a 1024-episode bandit run that
was three or four full collections, 150-800 ms in all, with the interpreter lock held, the lanes' calls
unsent and the server idle (``bench/bench_driver_batch.py``; docs/rollout.md). Young collections go on,
so the short-lived cycles a run makes are still freed; what reaches the oldest generation waits for the first full
collection after the run, which the restored threshold brings as usual.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTIONS_HELD = 1 << 30
"""The oldest generation's threshold while a run holds them off: young collections between full ones."""

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, ...] = ()


@contextmanager
def full_collections_held() -> Iterator[None]:
    """No full collection while inside; nested or concurrent runs restore the threshold when the last ends."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(_saved[0], _saved[1], FULL_COLLECTIONS_HELD)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.set_threshold(*_saved)

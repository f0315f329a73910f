"""Idempotency keys of ``POST /v1/sessions``: a retried create answers the session its first attempt opened.

A client that loses the answer of a create (a reset connection, a keep-alive connection the server closed)
sends it again. Without a key that opens a second session and leaves the first one an orphan until its
lease runs out. With the same ``Idempotency-Key`` header (``protocol.IDEMPOTENCY_HEADER``) the retry gets
the first attempt's answer: at once when it finished, after waiting for it while it runs. A key names one
request of one token: the same key with another body, or from another token, is another request (it opens its
own session). A failed attempt leaves nothing behind, so its retry tries again, and so does a create whose
key's session has closed since (a retry must not be handed a dead session).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentenvs import protocol
from agentenvs.protocol import CreateSession, MalformedRequest, SessionBusy

KEY_TTL_S = 600.0
"""How long a key keeps its answer (a client retries within seconds; this is ample)."""
MAX_KEYS = 10000
"""The most keys kept; past it the oldest are forgotten first."""


@dataclass
class _Attempt:
    request: CreateSession
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None


def check_key(key: str | None) -> str | None:
    """The key, or None without the header; a malformed key (an empty one too) is refused (400), not ignored."""
    if key is None:
        return None
    if not protocol.IDEMPOTENCY_KEY.match(key):
        raise MalformedRequest(
            f"the {protocol.IDEMPOTENCY_HEADER} header must be 8 to 128 of A-Z a-z 0-9 _ . : - "
            "(a random id the client makes up per session, such as a uuid4)"
        )
    return key


class CreateKeys:
    """The answers of keyed creates by (token digest, key), for ``KEY_TTL_S`` and at most ``MAX_KEYS`` of them."""

    def __init__(self, is_open: Callable[[str], bool], ttl_s: float = KEY_TTL_S, limit: int = MAX_KEYS) -> None:
        self.is_open = is_open
        """Whether a session id is still open (a key whose session closed opens a new one)."""
        self.ttl_s, self.limit = ttl_s, limit
        self._attempts: OrderedDict[tuple[bytes | None, str], _Attempt] = OrderedDict()
        self._lock = threading.Lock()

    def create(
        self,
        owner: bytes | None,
        key: str | None,
        request: CreateSession,
        open_session: Callable[[], dict[str, Any]],
        wait_s: float,
    ) -> dict[str, Any]:
        """``open_session()``'s answer, or the answer the first attempt with this key got (waiting up to ``wait_s``
        for one still running)."""
        if key is None:
            return open_session()
        while True:
            attempt, mine = self._claim((owner, key), request)
            if mine:
                return self._run(owner, key, attempt, open_session)
            if not attempt.done.wait(wait_s):
                raise SessionBusy(
                    f"the create with this {protocol.IDEMPOTENCY_HEADER} is still opening its session; retry later"
                )
            if attempt.answer is not None:
                return attempt.answer

    def _claim(self, slot: tuple[bytes | None, str], request: CreateSession) -> tuple[_Attempt, bool]:
        """The attempt holding ``slot`` and whether it is this caller's (a new one) or an earlier one's to wait for."""
        with self._lock:
            self._forget_old()
            attempt = self._attempts.get(slot)
            if attempt is not None and attempt.request == request and not self._stale(attempt):
                return attempt, False
            self._attempts.pop(slot, None)
            attempt = self._attempts[slot] = _Attempt(request)
            return attempt, True

    def _stale(self, attempt: _Attempt) -> bool:
        """Whether ``attempt`` finished with a session that is closed now."""
        return attempt.answer is not None and not self.is_open(attempt.answer["session_id"])

    def _run(
        self, owner: bytes | None, key: str, attempt: _Attempt, open_session: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        try:
            attempt.answer = open_session()
            return attempt.answer
        finally:
            if attempt.answer is None:  # failed: forget it, so a retry tries again
                with self._lock:
                    if self._attempts.get((owner, key)) is attempt:
                        del self._attempts[(owner, key)]
            attempt.done.set()

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - self.ttl_s
        while self._attempts:
            oldest = next(iter(self._attempts.values()))
            if oldest.started >= cutoff and len(self._attempts) <= self.limit:
                return
            self._attempts.popitem(last=False)

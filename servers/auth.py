"""Bearer tokens: the one way a token is hashed and compared, for the request check and the session owner.

A token is kept only as its sha256 digest and compared with ``hmac.compare_digest`` (docs/protocol.md,
Security). A session remembers the digest of the token that opened it; a server without tokens gives
every request the owner ``None``, which matches every session.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from agentenvs.protocol import Unauthorized


def token_digest(token: str) -> bytes:
    """The digest a token is known by (header values arrive as latin-1 text, so odd bytes survive)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def same_owner(expected: bytes | None, given: bytes | None) -> bool:
    """Whether a request with owner ``given`` may use a session opened by ``expected``."""
    if expected is None:
        return True
    return given is not None and hmac.compare_digest(expected, given)


class Authenticator:
    """Checks the ``Authorization`` header against the configured tokens; answers the request's owner digest."""

    def __init__(self, tokens: tuple[str, ...]):
        self.digests = tuple(token_digest(t) for t in tokens)

    @property
    def required(self) -> bool:
        return bool(self.digests)

    def __call__(self, headers: Mapping[str, str]) -> bytes | None:
        """The digest of the request's token when tokens are configured (raises on a missing or wrong one)."""
        if not self.digests:
            return None
        scheme, _, value = headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("this server needs a token: send the header 'Authorization: Bearer <token>'")
        given = token_digest(value.strip())
        if not any(hmac.compare_digest(given, d) for d in self.digests):
            raise Unauthorized("the token is not accepted by this server; check the token the server was given")
        return given

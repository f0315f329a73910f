"""Seeds derived from names, identical in every process and on every machine.

Python's ``hash()`` is salted per process, so it must never seed an environment; these helpers
hash with sha256 instead.
"""

from __future__ import annotations

import hashlib

import numpy as np

from agentenvs.errors import InvalidArgument


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (names, ids, integers), stable across processes."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def rng_for(*parts: object) -> np.random.Generator:
    """A numpy generator seeded from ``parts`` through :func:`derive_seed`."""
    return np.random.Generator(np.random.PCG64(derive_seed(*parts)))


def check_seed(seed: object) -> int | None:
    """The seed as an ``int`` (or None), or :class:`InvalidArgument`: the one rule for ``reset(seed=...)`` in
    process and on the wire (numpy integers pass, booleans and negatives do not)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        shown = repr(seed) if not isinstance(seed, (dict, list)) else type(seed).__name__
        raise InvalidArgument(f"seed must be a non-negative integer or None (null in JSON), got {shown[:60]}")
    return int(seed)

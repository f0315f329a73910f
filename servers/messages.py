"""The messages between the server and its worker processes (docs/server.md, "Shape").

Named tuples, so every field has a name and a pickled message costs what a plain tuple costs on the
step path. The server sends :class:`Call`; a worker answers :class:`Reply`, whose ``outcome`` is an
:class:`Outcome` holding either the result (a :class:`Result` for the session operations) or a
:class:`Failure`.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Call(NamedTuple):
    """Server to worker: run ``op`` (on ``session_id``'s environment, for the session operations)."""

    request_id: int
    op: str
    session_id: str | None
    args: tuple


class Failure(NamedTuple):
    """Why a call failed, as the protocol error it becomes; ``fatal`` closes the session."""

    code: str
    http_status: int
    message: str
    fatal: bool


class Outcome(NamedTuple):
    """``ok`` with the call's result as ``payload``, or not ``ok`` with a :class:`Failure`."""

    ok: bool
    payload: Any


class Reply(NamedTuple):
    """Worker to server: the outcome of the call ``request_id`` (replies come in any order)."""

    request_id: int
    outcome: Outcome


class Result(NamedTuple):
    """A session operation's answer, encoded to JSON in the worker, and the session's turn and done flag after it."""

    body: bytes
    turn: int
    done: bool

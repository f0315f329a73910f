"""The open sessions of a server and the tombstones of closed ones, behind one lock.

A session is used by one request at a time (``acquire``/``release``) and answers only the token that
opened it. A closed session leaves a tombstone saying why, so a later request learns that it expired or
that its worker died (``env_failed`` once, then 404) instead of a bare "unknown" (docs/protocol.md).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.protocol import SessionBusy, UnknownSession
from agentenvs.servers.auth import same_owner
from agentenvs.servers.inline import InlineHost
from agentenvs.servers.worker import WorkerHandle

TOMBSTONES = 20000
"""How many closed session ids keep their reason; older ones answer a plain 404."""


@dataclass
class Session:
    id: str
    env: str
    worker: WorkerHandle | InlineHost
    owner: bytes | None
    """The digest of the token that opened the session (``servers/auth.py``); None on a server without tokens."""
    privileged: bool
    last_used: float
    turn: int = 0
    done: bool = False
    last_step: tuple[int, bytes] | None = None
    """``(turn the client sent, answer)`` of the last step, given back to a retry of it."""
    busy: bool = False
    """A request holds the session (one at a time)."""
    overdue: bool = False
    """A call past its time limit holds the session until it returns (the request that sent it has answered)."""
    closed: bool = False
    """The session is out of the table; its environment is freed once nothing holds it."""
    freed: bool = False


@dataclass
class Tombstone:
    """Why a session id is no longer open; ``error`` is raised once (a worker death), then 404."""

    owner: bytes | None
    message: str
    error: type[AgentEnvsError] = UnknownSession


class SessionTable:
    """Sessions by id and tombstones; ``lock`` also guards the workers' session counts and ``creating``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: dict[str, Session] = {}
        self.creating = 0
        self._tombstones: OrderedDict[str, Tombstone] = OrderedDict()

    def bury(self, session: Session, message: str, error: type[AgentEnvsError] = UnknownSession) -> None:
        """Record why ``session`` is closed (call with the lock held)."""
        self._tombstones[session.id] = Tombstone(session.owner, message, error)
        while len(self._tombstones) > TOMBSTONES:
            self._tombstones.popitem(last=False)

    def acquire(self, session_id: str, owner: bytes | None) -> Session:
        """The open session ``session_id`` of ``owner``, marked busy; raises why it cannot be used."""
        if not protocol.SESSION_ID.match(session_id):
            raise UnknownSession(f"no session {session_id[:40]!r}: session ids are 32 lower-case hex characters")
        with self.lock:
            session = self.sessions.get(session_id)
            if session is None or not same_owner(session.owner, owner):
                tomb = self._tombstones.get(session_id)
                if tomb is not None and same_owner(tomb.owner, owner):
                    if tomb.error is not UnknownSession:
                        self._tombstones[session_id] = Tombstone(tomb.owner, tomb.message)
                    raise tomb.error(tomb.message)
                raise UnknownSession(f"no open session {session_id}; open one with POST /v1/sessions")
            if session.busy:
                raise SessionBusy(
                    f"session {session_id} is still serving another request; send one request at a time per session"
                )
            session.busy = True
            session.last_used = time.monotonic()
            return session

    def release(self, session: Session) -> bool:
        """The request holding ``session`` lets go; True when the caller must free its environment (it was closed
        while held)."""
        with self.lock:
            session.busy = False
            session.last_used = time.monotonic()
            return self._to_free(session)

    def closing(self, session: Session) -> bool:
        """``session`` is closed; True when the caller must free its environment now (nothing holds it)."""
        with self.lock:
            session.closed = True
            return not session.busy and self._to_free(session)

    @staticmethod
    def _to_free(session: Session) -> bool:
        """Whether ``session`` is closed and not yet freed, taking the freeing on (call with the lock held)."""
        if session.closed and not session.freed:
            session.freed = True
            return True
        return False

    def add(self, session: Session) -> None:
        """Open ``session``, created by the request that holds it."""
        with self.lock:
            session.busy = False
            self.sessions[session.id] = session

    def owned(self, session_id: str, owner: bytes | None) -> Session | None:
        """The open session ``session_id`` if ``owner`` may use it, else None (no tombstone, no busy check)."""
        with self.lock:
            session = self.sessions.get(session_id)
            return session if session is not None and same_owner(session.owner, owner) else None

    def remove(self, session: Session, message: str, *, reported: bool = False) -> bool:
        """Take ``session`` out; True when it was open. ``reported``: the client is told now, later just 404."""
        with self.lock:
            was_open = self.sessions.pop(session.id, None) is not None
            if was_open or reported:
                self.bury(session, message)
        return was_open

    def remove_where(
        self,
        keep: Callable[[Session], bool],
        message: Callable[[Session], str],
        error: type[AgentEnvsError] = UnknownSession,
    ) -> list[Session]:
        """Take out every session for which ``keep(session)`` is false, burying each with ``message(session)``."""
        with self.lock:
            gone = [s for s in self.sessions.values() if not keep(s)]
            for session in gone:
                del self.sessions[session.id]
                self.bury(session, message(session), error)
        return gone

    def clear(self) -> list[Session]:
        with self.lock:
            sessions = list(self.sessions.values())
            self.sessions.clear()
        return sessions

    def by_env(self) -> dict[str, int]:
        with self.lock:
            counts: dict[str, int] = {}
            for session in self.sessions.values():
                counts[session.env] = counts.get(session.env, 0) + 1
        return counts

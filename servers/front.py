"""The ASGI application ``agentenvs serve`` runs: the episode routes answered here, every other route by flask.

Opening and closing sessions, steps, resets and batch steps are the requests a rollout sends most, and on a cheap
environment the web framework's request machinery is most of their cost (``bench/bench_server_peer.py``;
a reset through flask took three times a step answered here). So these routes (``NATIVE``) are answered
on the event loop itself when every session they touch lives in the server process (an inline
environment: its calls cannot block), or in a thread when one lives in a worker process (the call waits
on the worker's answer). Both go through the same session manager, token check, error answers and request
metrics as the flask app. Anything else (another route or method, a trailing slash, a chunked or oversized
body) goes to the flask app, run in threads by ``a2wsgi``, which keeps the answers for those cases (404,
405, 413) in one place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2wsgi import WSGIMiddleware

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.servers.answers import Answer, error_answer, internal_error_answer, record_request
from agentenvs.servers.app import create_app
from agentenvs.servers.auth import Authenticator
from agentenvs.servers.openenv import serve_websocket
from agentenvs.servers.sessions import SessionManager

JSON = (b"content-type", b"application/json")


IDEMPOTENCY_HEADER = protocol.IDEMPOTENCY_HEADER.lower().encode()


def _step(
    manager: SessionManager, session_id: str, body: dict[str, Any], owner: bytes | None, key: str | None
) -> bytes:
    return manager.step(session_id, protocol.StepRequest.parse(body), owner)


def _reset(
    manager: SessionManager, session_id: str, body: dict[str, Any], owner: bytes | None, key: str | None
) -> bytes:
    return manager.reset(session_id, protocol.ResetRequest.parse(body), owner)


def _batch_step(
    manager: SessionManager, session_id: str, body: dict[str, Any], owner: bytes | None, key: str | None
) -> bytes:
    return b'{"results":[' + b",".join(manager.batch_step(protocol.parse_batch(body), owner)) + b"]}"


def _create(
    manager: SessionManager, session_id: str, body: dict[str, Any], owner: bytes | None, key: str | None
) -> bytes:
    return protocol.dumps(manager.create(protocol.CreateSession.parse(body), owner, key))


def _close(
    manager: SessionManager, session_id: str, body: dict[str, Any], owner: bytes | None, key: str | None
) -> bytes:
    manager.close(session_id, owner)
    return b""


NATIVE: dict[str, Callable[[SessionManager, str, dict[str, Any], bytes | None, str | None], bytes]] = {
    "create_session": _create,
    "close": _close,
    "step": _step,
    "reset": _reset,
    "batch_step": _batch_step,
}
"""The routes answered here, by name in ``protocol.ROUTES``; each answers exactly as its flask handler. Each takes
the request's ``Idempotency-Key`` header too (only opening a session uses it)."""
EMPTY_OK = {"reset"}
"""Routes whose body may be empty (a reset with no seed and no options)."""


class _Native:
    """One native route: how to recognise its path and how to answer it."""

    def __init__(self, name: str):
        self.route = protocol.ROUTE[name]
        self.answer = NATIVE[name]
        self.label = f"{self.route.method} {self.route.flask_rule}"
        parts = self.route.path.split("{session_id}")
        self.prefix, self.suffix = (parts[0], parts[1]) if len(parts) == 2 else (self.route.path, None)

    def session_id(self, path: str) -> str | None:
        """The session id in ``path`` ("" for a route without one), or None when the path is not this route's."""
        if self.suffix is None:
            return "" if path == self.prefix else None
        if not (path.startswith(self.prefix) and path.endswith(self.suffix)):
            return None
        session_id = path[len(self.prefix) : len(path) - len(self.suffix)]
        return session_id if session_id and "/" not in session_id else None


class Front:
    """ASGI app: plain steps answered natively, the rest handed to the flask app in a thread pool."""

    def __init__(self, manager: SessionManager, max_request_bytes: int, threads: int):
        self.manager, self.max_request_bytes = manager, max_request_bytes
        self.auth = Authenticator(manager.config.tokens)
        app = create_app(manager, tokens=manager.config.tokens, max_request_bytes=max_request_bytes, in_flight=self)
        self.wsgi = WSGIMiddleware(terminated_input(app), workers=threads)
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="step")
        self.native = [_Native(name) for name in NATIVE]
        self.count = 0
        """Requests being served (the ``agentenvs_requests_in_flight`` gauge)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # OpenEnv's session route (servers/openenv.py)
            return await serve_websocket(scope, receive, send, self.manager, self.executor)
        if scope["type"] != "http":
            return await self.wsgi(scope, receive, send)
        self.count += 1
        try:
            request = self._native_request(scope)
            if request is None:
                await self.wsgi(scope, receive, send)
            else:
                await self._serve(*request, receive, send)
        finally:
            self.count -= 1

    def _native_request(self, scope: dict[str, Any]) -> tuple[_Native, str, bytes, str | None] | None:
        """(route, session id, Authorization header, Idempotency-Key header) when this request is answered here."""
        method, path = scope["method"], scope["path"]
        for native in self.native:
            session_id = native.session_id(path) if native.route.method == method else None
            if session_id is not None:
                break
        else:
            return None
        length, authorization, chunked, key = b"0", b"", False, None  # no Content-Length, not chunked: an empty body
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"authorization":
                authorization = value
            elif name == b"transfer-encoding":
                chunked = True
            elif name == IDEMPOTENCY_HEADER:
                key = value.decode("latin-1")
        plain_body = length.isdigit() and int(length) <= self.max_request_bytes and not chunked
        return (native, session_id, authorization, key) if plain_body else None

    async def _serve(
        self, native: _Native, session_id: str, authorization: bytes, key: str | None, receive: Any, send: Any
    ) -> None:
        started = time.perf_counter()
        raw = await read_body(receive)
        if raw is None:
            return  # the client went away before its body arrived
        request = self._parse(native, raw)
        if self._inline(native, session_id, request):
            status, headers, body = self.answer(native, session_id, authorization, request, key)
        else:
            loop = asyncio.get_running_loop()
            status, headers, body = await loop.run_in_executor(
                self.executor, self.answer, native, session_id, authorization, request, key
            )
        head = [JSON, (b"content-length", str(len(body)).encode())] if status != 204 else []  # 204: no body
        head += [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})
        record_request(self.manager.metrics, native.label, status, started)

    @staticmethod
    def _parse(native: _Native, raw: bytes) -> dict[str, Any] | AgentEnvsError:
        """The body as a JSON object, parsed once, or the error to answer (after the token check); a route
        that takes no body ignores what came (as its flask handler does)."""
        if native.route.request is None:
            return {}
        try:
            return protocol.parse_json_object(raw, empty_ok=native.route.name in EMPTY_OK)
        except AgentEnvsError as exc:
            return exc

    def _inline(self, native: _Native, session_id: str, request: dict[str, Any] | AgentEnvsError) -> bool:
        """Whether every session the request touches lives in the server process (so it cannot block)."""
        if session_id:
            return self.manager.runs_inline(session_id)
        if native.route.name == "create_session":
            return not isinstance(request, dict) or self.manager.opens_inline(request.get("env"))
        steps = request.get("steps") if isinstance(request, dict) else None
        if not isinstance(steps, list):
            return True  # answered at once with its error
        ids = [item.get("session_id") for item in steps if isinstance(item, dict)]
        return all(isinstance(i, str) and self.manager.runs_inline(i) for i in ids)

    def answer(
        self,
        native: _Native,
        session_id: str,
        authorization: bytes,
        request: dict[str, Any] | AgentEnvsError,
        key: str | None = None,
    ) -> Answer:
        """The answer to one native request: its JSON, or the protocol's error for what went wrong."""
        metrics = self.manager.metrics
        try:
            owner = self.auth({"Authorization": authorization.decode("latin-1")})
            if isinstance(request, AgentEnvsError):
                raise request
            return native.route.ok, {}, native.answer(self.manager, session_id, request, owner, key)
        except AgentEnvsError as exc:
            return error_answer(exc, metrics, self.manager.config.retry_after_s)
        except Exception as exc:
            return internal_error_answer(exc, metrics)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        self.wsgi.executor.shutdown(wait=True)


def terminated_input(app: Any) -> Any:
    """Tell werkzeug the body stream ends where the request does (a2wsgi's stream does), so a chunked body,
    which has no Content-Length, is read rather than taken as empty."""

    def wsgi_app(environ: dict[str, Any], start_response: Any) -> Any:
        environ["wsgi.input_terminated"] = True
        return app(environ, start_response)

    return wsgi_app


async def read_body(receive: Any) -> bytes | None:
    """The whole request body, or None when the client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)

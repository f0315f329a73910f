"""The ASGI application ``agentenvs serve`` runs: the step route answered here, every other route by the flask app.

A step is the request a rollout sends most, and on a cheap environment the web framework's request machinery is
most of its cost (``bench/bench_server_peer.py``). So the step route is answered on the event loop itself when
the session lives in the server process (an inline environment: its step cannot block), or in a thread when it
lives in a worker process (the call waits on the worker's answer). Both go through the same session manager,
token check, error answers and request metrics as the flask app. Anything that is not a plain step (another
route or method, a trailing slash, a chunked or oversized body) goes to the flask app, run in threads by
``a2wsgi``, which keeps the answers for those cases (404, 405, 413) in one place.
"""

from __future__ import annotations

import asyncio
import time
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

STEP = next(route for route in protocol.ROUTES if route.name == "step")
JSON = (b"content-type", b"application/json")


class Front:
    """ASGI app: plain steps answered natively, the rest handed to the flask app in a thread pool."""

    def __init__(self, manager: SessionManager, max_request_bytes: int, threads: int):
        self.manager, self.max_request_bytes = manager, max_request_bytes
        self.auth = Authenticator(manager.config.tokens)
        app = create_app(manager, tokens=manager.config.tokens, max_request_bytes=max_request_bytes, in_flight=self)
        self.wsgi = WSGIMiddleware(terminated_input(app), workers=threads)
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="step")
        self.prefix, self.suffix = STEP.path.split("{session_id}")
        self.label = f"{STEP.method} {STEP.flask_rule}"
        self.count = 0
        """Requests being served (the ``agentenvs_requests_in_flight`` gauge)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # OpenEnv's session route (servers/openenv.py)
            return await serve_websocket(scope, receive, send, self.manager, self.executor)
        if scope["type"] != "http":
            return await self.wsgi(scope, receive, send)
        self.count += 1
        try:
            step = self._plain_step(scope)
            if step is None:
                await self.wsgi(scope, receive, send)
            else:
                await self._serve_step(*step, receive, send)
        finally:
            self.count -= 1

    def _plain_step(self, scope: dict[str, Any]) -> tuple[str, bytes] | None:
        """(session id, Authorization header) when this request is a plain step answered here."""
        path: str = scope["path"]
        if scope["method"] != STEP.method or not (path.startswith(self.prefix) and path.endswith(self.suffix)):
            return None
        session_id = path[len(self.prefix) : len(path) - len(self.suffix)]
        length, authorization, chunked = b"", b"", False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"authorization":
                authorization = value
            elif name == b"transfer-encoding":
                chunked = True
        plain_body = length.isdigit() and int(length) <= self.max_request_bytes and not chunked
        return (session_id, authorization) if session_id and "/" not in session_id and plain_body else None

    async def _serve_step(self, session_id: str, authorization: bytes, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        raw = await read_body(receive)
        if raw is None:
            return  # the client went away before its body arrived
        if self.manager.runs_inline(session_id):
            status, headers, body = self.answer_step(session_id, authorization, raw)
        else:
            loop = asyncio.get_running_loop()
            status, headers, body = await loop.run_in_executor(
                self.executor, self.answer_step, session_id, authorization, raw
            )
        head = [JSON, (b"content-length", str(len(body)).encode())]
        head += [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})
        record_request(self.manager.metrics, self.label, status, started)

    def answer_step(self, session_id: str, authorization: bytes, raw: bytes) -> Answer:
        """The answer to one step request: the step's JSON, or the protocol's error for what went wrong."""
        metrics = self.manager.metrics
        try:
            owner = self.auth({"Authorization": authorization.decode("latin-1")})
            request = protocol.StepRequest.parse(protocol.parse_json_object(raw))
            return 200, {}, self.manager.step(session_id, request, owner)
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

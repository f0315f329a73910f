"""``POST /v1/sessions/<id>/step`` served without flask's request machinery: the route a rollout calls most.

Flask builds a request object, matches the URL map, runs the hooks and builds a response object for every
request; on a cheap environment that is most of a step's cost (``bench/bench_server_peer.py``). This WSGI
middleware sits in front of the flask app and answers the step route itself, through the same session
manager, token check, error answers and request metrics. Anything it does not recognise as a plain step
(another route or method, a trailing slash, a chunked or oversized body) goes on to flask, which keeps the
answers for those cases (404, 405, 413) in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.servers.answers import Answer, error_answer, internal_error_answer, record_request
from agentenvs.servers.auth import Authenticator
from agentenvs.servers.sessions import SessionManager

STEP = next(route for route in protocol.ROUTES if route.name == "step")
STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}


class StepFastPath:
    """WSGI middleware: the step route answered here, everything else passed to ``app``."""

    def __init__(
        self, app: Callable[..., Iterable[bytes]], manager: SessionManager, auth: Authenticator, max_request_bytes: int
    ):
        self.app, self.manager, self.auth = app, manager, auth
        self.max_request_bytes = max_request_bytes
        self.prefix, self.suffix = STEP.path.split("{session_id}")
        self.label = f"{STEP.method} {STEP.flask_rule}"

    def _session_id(self, environ: dict[str, Any]) -> str | None:
        """The session id when this request is a plain step this middleware answers."""
        path: str = environ.get("PATH_INFO", "")
        step_path = path.startswith(self.prefix) and path.endswith(self.suffix)
        if environ["REQUEST_METHOD"] != STEP.method or not step_path:
            return None
        session_id = path[len(self.prefix) : len(path) - len(self.suffix)]
        length: str = environ.get("CONTENT_LENGTH") or ""
        chunked = "HTTP_TRANSFER_ENCODING" in environ
        plain_body = length.isdigit() and int(length) <= self.max_request_bytes and not chunked
        return session_id if session_id and "/" not in session_id and plain_body else None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        session_id = self._session_id(environ)
        if session_id is None:
            return self.app(environ, start_response)
        started = time.perf_counter()
        status, headers, body = self._step(session_id, environ)
        start_response(
            STATUS_LINES[status],
            [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers.items()],
        )
        record_request(self.manager.metrics, self.label, status, started)
        return [body]

    def _step(self, session_id: str, environ: dict[str, Any]) -> Answer:
        metrics = self.manager.metrics
        try:
            owner = self.auth({"Authorization": environ.get("HTTP_AUTHORIZATION", "")})
            raw = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
            request = protocol.StepRequest.parse(protocol.parse_json_object(raw))
            return 200, {}, self.manager.step(session_id, request, owner)
        except AgentEnvsError as exc:
            return error_answer(exc, metrics, self.manager.config.retry_after_s)
        except Exception as exc:
            return internal_error_answer(exc, metrics)

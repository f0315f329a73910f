"""The flask app of protocol v1 (docs/protocol.md): one handler per route of ``protocol.ROUTES``, bearer
tokens, JSON errors, metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.protocol import MalformedRequest, MethodNotAllowed, RequestTooLarge, RouteNotFound
from agentenvs.servers.answers import Answer, error_answer, internal_error_answer, record_request
from agentenvs.servers.auth import Authenticator
from agentenvs.servers.document import openapi_document
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.predictions import resolve_predictions
from agentenvs.servers.sessions import SessionManager

DEFAULT_MAX_REQUEST_BYTES = 1 << 20
DRAIN_BYTES = 64 << 20
DRAIN_SECONDS = 10.0
"""How much of an oversized body the server reads and drops before answering 413. A client is still sending
when the answer goes out; closing a socket with unread bytes makes the kernel reset the connection, and the
client would lose the 413 to a "connection reset". Past these bounds the server closes anyway."""
HTTP_ERRORS: dict[int, type[AgentEnvsError]] = {
    400: MalformedRequest,
    404: RouteNotFound,
    405: MethodNotAllowed,
    413: RequestTooLarge,
}
HTTP_ERROR_HINTS = {
    400: "the request could not be read; send a JSON object body",
    404: "no such route; GET /v1/openapi.json lists the routes",
    405: "this route does not take that method; GET /v1/openapi.json lists the routes",
    413: "the request body is over the server's limit of {limit} bytes (--max-request-bytes)",
}


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = payload if isinstance(payload, bytes) else protocol.dumps(payload)
    return Response(body, status=status, headers=headers, mimetype="application/json")


def drain_body(stream: Any, limit: int = DRAIN_BYTES, seconds: float = DRAIN_SECONDS) -> bool:
    """Read and drop what is left of a request body; False when ``limit`` bytes or ``seconds`` ran out first."""
    deadline = time.monotonic() + seconds
    while limit > 0 and time.monotonic() < deadline:
        chunk = stream.read(min(1 << 16, limit))
        if not chunk:
            return True
        limit -= len(chunk)
    return False


def _body(empty_ok: bool = False) -> dict[str, Any]:
    return protocol.parse_json_object(request.get_data(cache=False), empty_ok=empty_ok)


def _handlers(manager: SessionManager, auth: Authenticator, in_flight: Any) -> dict[str, Callable[..., Response]]:
    """The handler of every route in ``protocol.ROUTES``, by route name."""
    document = openapi_document(manager.descriptions, manager.task_ids, token_required=auth.required)

    def healthz() -> Response:
        answer = manager.health()
        return json_response(answer, 200 if answer["status"] == "ok" else 503)

    def readyz() -> Response:
        answer = manager.readiness()
        return json_response(answer, 200 if answer["ready"] else 503)

    def metrics() -> Response:
        auth(request.headers)
        return Response(manager.render_metrics(in_flight), mimetype="text/plain; version=0.0.4")

    def close(session_id: str) -> Response:
        manager.close(session_id, auth(request.headers))
        return Response(status=204)

    def batch_step() -> Response:
        answers = manager.batch_step(protocol.parse_batch(_body()), auth(request.headers))
        return json_response(b'{"results":[' + b",".join(answers) + b"]}")

    def session(call: Callable[..., Any], parse: Callable[[], Any] | None = None) -> Callable[[str], Response]:
        def handler(session_id: str) -> Response:
            owner = auth(request.headers)
            return json_response(call(session_id, owner) if parse is None else call(session_id, parse(), owner))

        return handler

    def listing(answer: Callable[[], Any]) -> Callable[[], Response]:
        def handler() -> Response:
            auth(request.headers)
            return json_response(answer())

        return handler

    def create_session() -> Response:
        owner = auth(request.headers)
        key = request.headers.get(protocol.IDEMPOTENCY_HEADER)
        return json_response(manager.create(protocol.CreateSession.parse(_body()), owner, key), 201)

    return {
        "resolve_predictions": lambda: json_response(resolve_predictions(_body(), auth, request.headers)),
        "healthz": healthz,
        "readyz": readyz,
        "metrics": metrics,
        "openapi": listing(lambda: document),
        "envs": listing(lambda: {"protocol": protocol.PROTOCOL_VERSION, "envs": manager.descriptions}),
        "create_session": create_session,
        "session_info": session(manager.session_info),
        "close": close,
        "reset": session(manager.reset, lambda: protocol.ResetRequest.parse(_body(empty_ok=True))),
        "step": session(manager.step, lambda: protocol.StepRequest.parse(_body())),
        "get_state": session(manager.get_state),
        "set_state": session(manager.set_state, lambda: protocol.parse_state(_body())),
        "describe": session(manager.describe),
        "extract_action": session(manager.extract_action, lambda: protocol.parse_extract(_body())),
        "batch_step": batch_step,
    }


def _register_errors(app: Flask, metrics: Metrics, retry_after_s: int, max_request_bytes: int) -> None:
    """Every failure answers the protocol's JSON error shape; a 405 names the allowed methods."""

    @app.errorhandler(AgentEnvsError)
    def agentenvs_error(exc: AgentEnvsError) -> Response:
        return json_response(*_reorder(error_answer(exc, metrics, retry_after_s)))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        cls = HTTP_ERRORS.get(status, AgentEnvsError)
        hint = HTTP_ERROR_HINTS.get(status, exc.description or "").format(limit=max_request_bytes)
        metrics.inc("agentenvs_errors_total", (("code", cls.code),))
        headers = {}
        if status == 405:
            headers["Allow"] = ", ".join(getattr(exc, "valid_methods", None) or ())
        if status == 413 and not drain_body(request.environ["wsgi.input"]):
            headers["Connection"] = "close"
        return json_response(protocol.error_body(cls.code, hint), status, headers)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        return json_response(*_reorder(internal_error_answer(exc, metrics)))


def _reorder(answer: Answer) -> tuple[bytes, int, dict[str, str]]:
    status, headers, body = answer
    return body, status, headers


def create_app(
    manager: SessionManager,
    *,
    tokens: tuple[str, ...] = (),
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    in_flight: Any = None,
) -> Flask:
    """The app serving ``manager``'s sessions; ``tokens`` (if any) are the accepted bearer tokens."""
    app = Flask("agentenvs.servers")
    app.config["MAX_CONTENT_LENGTH"] = max_request_bytes
    app.url_map.strict_slashes = False
    metrics = manager.metrics

    @app.before_request
    def start_timer() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def record(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        record_request(metrics, f"{request.method} {route}", response.status_code, g.get("started", 0.0))
        return response

    _register_errors(app, metrics, manager.config.retry_after_s, max_request_bytes)
    auth = Authenticator(tokens)
    handlers = _handlers(manager, auth, in_flight)
    for route in protocol.ROUTES:
        app.add_url_rule(route.flask_rule, route.name, handlers[route.name], methods=[route.method])
    return app

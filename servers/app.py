"""The flask app of protocol v1 (DESIGN §3): routes, bearer tokens, JSON errors, metrics."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.protocol import MalformedRequest, MethodNotAllowed, RequestTooLarge, RouteNotFound, Unauthorized
from agentenvs.servers.openapi import openapi_document
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

log = logging.getLogger("agentenvs.servers")


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
    digests = [hashlib.sha256(t.encode("utf-8")).digest() for t in tokens]

    def authenticate() -> str | None:
        """The request's token when tokens are configured (raises on a missing or wrong one), else None."""
        if not digests:
            return None
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("this server needs a token: send the header 'Authorization: Bearer <token>'")
        value = value.strip()
        given = hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()
        if not any(hmac.compare_digest(given, d) for d in digests):
            raise Unauthorized("the token is not accepted by this server; check the token the server was given")
        return value

    def body(empty_ok: bool = False) -> dict[str, Any]:
        return protocol.parse_json_object(request.get_data(cache=False), empty_ok=empty_ok)

    @app.before_request
    def start_timer() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def record(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        labels = (("route", f"{request.method} {route}"),)
        metrics.observe("agentenvs_request_duration_seconds", time.perf_counter() - g.get("started", 0.0), labels)
        metrics.inc("agentenvs_requests_total", (*labels, ("status", str(response.status_code))))
        return response

    @app.errorhandler(AgentEnvsError)
    def agentenvs_error(exc: AgentEnvsError) -> Response:
        metrics.inc("agentenvs_errors_total", (("code", exc.code),))
        headers = {}
        if exc.http_status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            headers["Retry-After"] = str(int(retry_after))
        if exc.http_status == 503:
            headers["Retry-After"] = "5"
        return json_response(protocol.error_body(exc.code, str(exc)), exc.http_status, headers)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        cls = HTTP_ERRORS.get(status, AgentEnvsError)
        hint = HTTP_ERROR_HINTS.get(status, exc.description or "").format(limit=max_request_bytes)
        metrics.inc("agentenvs_errors_total", (("code", cls.code),))
        headers = None
        if status == 413 and not drain_body(request.environ["wsgi.input"]):
            headers = {"Connection": "close"}
        return json_response(protocol.error_body(cls.code, hint), status, headers)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        log.exception("internal error")
        metrics.inc("agentenvs_errors_total", (("code", "internal_error"),))
        message = f"the server failed: {type(exc).__name__}: {str(exc)[:300]}"
        return json_response(protocol.error_body("internal_error", message), 500)

    @app.get("/healthz")
    def healthz() -> Response:
        stats = manager.stats()
        alive = sum(w["alive"] for w in stats["workers"])
        status = "draining" if manager.draining else ("ok" if alive else "degraded")
        answer = {
            "status": status,
            "protocol": protocol.PROTOCOL_VERSION,
            "sessions": stats["sessions"],
            "workers_alive": alive,
        }
        return json_response(answer, 200 if status == "ok" else 503)

    @app.get("/metrics")
    def prometheus() -> Response:
        authenticate()
        stats = manager.stats()
        gauges = {
            "agentenvs_sessions_active": {(("env", e),): float(n) for e, n in stats["sessions_by_env"].items()},
            "agentenvs_workers_alive": {(): float(sum(w["alive"] for w in stats["workers"]))},
        }
        if in_flight is not None:
            gauges["agentenvs_requests_in_flight"] = {(): float(in_flight.count)}
        return Response(metrics.render(gauges), mimetype="text/plain; version=0.0.4")

    @app.get("/v1/openapi.json")
    def openapi() -> Response:
        authenticate()
        return json_response(openapi_document())

    @app.get("/v1/envs")
    def envs() -> Response:
        authenticate()
        return json_response({"protocol": protocol.PROTOCOL_VERSION, "envs": manager.descriptions})

    @app.post("/v1/sessions")
    def create_session() -> Response:
        token = authenticate()
        answer = manager.create(protocol.CreateSession.parse(body()), token)
        return json_response(answer, 201)

    @app.get("/v1/sessions/<session_id>")
    def session_info(session_id: str) -> Response:
        return json_response(manager.session_info(session_id, authenticate()))

    @app.delete("/v1/sessions/<session_id>")
    def close_session(session_id: str) -> Response:
        manager.close(session_id, authenticate())
        return Response(status=204)

    @app.post("/v1/sessions/<session_id>/reset")
    def reset(session_id: str) -> Response:
        token = authenticate()
        return json_response(manager.reset(session_id, protocol.ResetRequest.parse(body(empty_ok=True)), token))

    @app.post("/v1/sessions/<session_id>/step")
    def step(session_id: str) -> Response:
        token = authenticate()
        return json_response(manager.step(session_id, protocol.StepRequest.parse(body()), token))

    @app.get("/v1/sessions/<session_id>/state")
    def get_state(session_id: str) -> Response:
        return json_response(manager.get_state(session_id, authenticate()))

    @app.post("/v1/sessions/<session_id>/state")
    def set_state(session_id: str) -> Response:
        token = authenticate()
        return json_response(manager.set_state(session_id, protocol.parse_state(body()), token))

    @app.get("/v1/sessions/<session_id>/describe")
    def describe(session_id: str) -> Response:
        return json_response(manager.describe(session_id, authenticate()))

    @app.post("/v1/sessions/<session_id>/extract_action")
    def extract_action(session_id: str) -> Response:
        token = authenticate()
        return json_response(manager.extract_action(session_id, protocol.parse_extract(body()), token))

    @app.post("/v1/batch/step")
    def batch_step() -> Response:
        token = authenticate()
        answers = manager.batch_step(protocol.parse_batch(body()), token)
        return json_response(b'{"results":[' + b",".join(answers) + b"]}")

    return app

"""The OpenAPI 3.0 document a server serves at ``/v1/openapi.json``, built from ``protocol.ROUTES``.

It describes the server it comes from (docs/protocol.md, "The OpenAPI document"): a bearer token is
declared only when the server was started with one, ``env`` is one of the served names, reset options
are the served splits and task ids, and links from ``POST /v1/sessions`` let a client (or a stateful
tester) follow a new session through reset and step.
"""

from __future__ import annotations

from typing import Any

from agentenvs import protocol
from agentenvs.protocol import Link, Route
from agentenvs.protocol_schemas import ref, served_schemas

ERROR_MEANING = {
    400: "malformed request (not JSON, not an object, missing, unknown or mistyped field)",
    401: "missing or wrong bearer token",
    404: "unknown, closed, expired or another token's session",
    409: "turn mismatch, episode over, reset needed, or another request on the session is running",
    413: "request or action too large",
    422: "bad arguments (unknown env, split, task, option, seed, keyword, action type)",
    429: "at the session cap; see Retry-After",
    500: "the environment failed, or its worker was lost (worker_lost); the session is closed",
    503: "shutting down, or no worker can take a session",
    504: "the call ran past the step time limit; the session is closed",
}
SESSION_PARAM = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "32 lower-case hex characters (128 random bits) from POST /v1/sessions",
    "schema": {"type": "string", "pattern": protocol.SESSION_ID.pattern},
}

ANY_ID_PARAM = {**SESSION_PARAM, "schema": {"type": "string"}}
IDEMPOTENCY_PARAM = {
    "name": protocol.IDEMPOTENCY_HEADER,
    "in": "header",
    "required": False,
    "description": "a key the client makes up per session (8 to 128 of A-Z a-z 0-9 _ . : -): a retried create with "
    "the same key and body answers the session the first attempt opened",
    "schema": {"type": "string", "pattern": protocol.IDEMPOTENCY_KEY.pattern},
}
PROBES = ("healthz", "readyz")
"""Routes whose 503 answers their own body (the server's state), not an error."""


def _content(media: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {media: {"schema": schema}}}


def _link(source: Route, link: Link) -> dict[str, Any]:
    where = "$request.path.session_id" if "{session_id}" in source.path else "$response.body#/session_id"
    answer: dict[str, Any] = {"operationId": link.target, "parameters": {"session_id": where}}
    if link.body is not None:
        answer["requestBody"] = link.body
    return answer


def _responses(route: Route) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "success"}
    if route.answer is not None:
        success |= _content(route.content, ref(route.answer))
    if route.links:
        success["links"] = {link.target: _link(route, link) for link in route.links}
    answers = {str(route.ok): success}
    for status in route.errors:
        schema = ref(route.answer) if route.name in PROBES and route.answer else ref("Error")
        answers[str(status)] = {"description": ERROR_MEANING[status], **_content("application/json", schema)}
    return answers


def _operation(route: Route, token_required: bool) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": route.name, "summary": route.summary, "responses": _responses(route)}
    if "{session_id}" in route.path:
        operation["parameters"] = [ANY_ID_PARAM if route.any_id else SESSION_PARAM]
    if route.idempotency_key:
        operation["parameters"] = [IDEMPOTENCY_PARAM]
    if route.request is not None:
        operation["requestBody"] = {"required": route.body_required, **_content("application/json", ref(route.request))}
    if token_required and not route.auth:
        operation["security"] = []
    return operation


def openapi_document(
    descriptions: dict[str, dict[str, Any]], task_ids: dict[str, dict[str, list[str]]], *, token_required: bool
) -> dict[str, Any]:
    """The document of a server serving ``descriptions`` (with their ``task_ids`` by split)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in protocol.ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, token_required)
    components: dict[str, Any] = {"schemas": served_schemas(descriptions, task_ids)}
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "agentenvs environment server", "version": protocol.PROTOCOL_VERSION},
        "paths": paths,
        "components": components,
    }
    if token_required:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document

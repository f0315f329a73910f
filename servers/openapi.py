"""The OpenAPI 3.0 document of protocol v1, served at ``/v1/openapi.json`` (docs/protocol.md explains it)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from agentenvs import protocol

SESSION_PARAM = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "32 lower-case hex characters (128 random bits) from POST /v1/sessions",
    "schema": {"type": "string"},
}
ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _answers(ok: int, schema: dict[str, Any] | None, errors: tuple[int, ...]) -> dict[str, Any]:
    answers: dict[str, Any] = {str(ok): {"description": "success", **(_json(schema) if schema else {})}}
    for status in errors:
        answers[str(status)] = {"description": ERROR_MEANING[status], **_json(ERROR)}
    return answers


ERROR_MEANING = {
    400: "malformed request (not JSON, not an object, missing or mistyped field)",
    401: "missing or wrong bearer token",
    404: "unknown, closed, expired or another token's session",
    409: "turn mismatch, episode over, reset needed, or another request on the session is running",
    413: "request or action too large",
    422: "bad arguments (unknown env, split, task, option, seed, keyword, action type)",
    429: "at the session cap; see Retry-After",
    500: "the environment failed; the session is closed",
    503: "shutting down",
    504: "the call ran past the step time limit; the session is closed",
}
SESSION_ERRORS = (400, 401, 404, 409, 413, 422, 500, 504)

OBJECT = {"type": "object", "additionalProperties": True}


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    schemas = {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                }
            },
        },
        "CreateSession": {
            "type": "object",
            "required": ["env"],
            "additionalProperties": False,
            "properties": {
                "env": {"type": "string", "description": "a served environment name (GET /v1/envs)"},
                "kwargs": {**OBJECT, "description": "constructor keywords (not paths, commands or addresses)"},
                "privileged": {"type": "boolean", "default": False, "description": "send info.privileged"},
            },
        },
        "Session": {
            "type": "object",
            "required": ["session_id", "lease_ttl_s", "env"],
            "properties": {
                "session_id": {"type": "string"},
                "lease_ttl_s": {"type": "number"},
                "env": {**OBJECT, "description": "the environment's describe()"},
            },
        },
        "Reset": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "seed": {"type": "integer", "minimum": 0, "nullable": True},
                "options": {
                    "type": "object",
                    "nullable": True,
                    "properties": {"task_id": {"type": "string"}, "split": {"type": "string"}},
                },
            },
        },
        "Observation": {
            "type": "object",
            "required": ["observation", "info"],
            "properties": {"observation": {"type": "string"}, "info": OBJECT},
        },
        "Step": {
            "type": "object",
            "required": ["action", "turn"],
            "additionalProperties": False,
            "properties": {
                "action": {"type": "string"},
                "turn": {"type": "integer", "minimum": 0, "description": "steps this client has already seen"},
            },
        },
        "StepAnswer": {
            "type": "object",
            "required": ["observation", "reward", "terminated", "truncated", "info"],
            "properties": {
                "observation": {"type": "string"},
                "reward": {"type": "number"},
                "terminated": {"type": "boolean"},
                "truncated": {"type": "boolean"},
                "info": OBJECT,
            },
        },
        "BatchStep": {
            "type": "object",
            "required": ["steps"],
            "additionalProperties": False,
            "properties": {
                "steps": {
                    "type": "array",
                    "maxItems": protocol.MAX_BATCH,
                    "items": {
                        "type": "object",
                        "required": ["session_id", "action", "turn"],
                        "properties": {
                            "session_id": {"type": "string"},
                            "action": {"type": "string"},
                            "turn": {"type": "integer", "minimum": 0},
                        },
                    },
                }
            },
        },
        "BatchAnswer": {
            "type": "object",
            "required": ["results"],
            "properties": {
                "results": {
                    "type": "array",
                    "items": {"oneOf": [{"$ref": "#/components/schemas/StepAnswer"}, ERROR]},
                }
            },
        },
        "Extract": {
            "type": "object",
            "required": ["response"],
            "additionalProperties": False,
            "properties": {"response": {"type": "string"}},
        },
        "Extracted": {
            "type": "object",
            "required": ["extracted"],
            "properties": {
                "extracted": {
                    "type": "object",
                    "nullable": True,
                    "properties": {
                        "action": {"type": "string"},
                        "start": {"type": "integer"},
                        "end": {"type": "integer"},
                    },
                }
            },
        },
        "State": {"type": "object", "required": ["state"], "properties": {"state": OBJECT}},
    }

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def body(name: str) -> dict[str, Any]:
        return {"required": True, **_json(ref(name))}

    session = [SESSION_PARAM]
    paths = {
        "/healthz": {
            "get": {"summary": "liveness (no token needed)", "security": [], "responses": _answers(200, OBJECT, (503,))}
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus text",
                "responses": {
                    "200": {"description": "metrics"},
                    "401": {"description": ERROR_MEANING[401], **_json(ERROR)},
                },
            }
        },
        "/v1/openapi.json": {"get": {"summary": "this document", "responses": _answers(200, OBJECT, (401,))}},
        "/v1/envs": {
            "get": {
                "summary": "served environments: names, versions, splits, capabilities",
                "responses": _answers(200, OBJECT, (401,)),
            }
        },
        "/v1/sessions": {
            "post": {
                "summary": "open a session",
                "requestBody": body("CreateSession"),
                "responses": _answers(201, ref("Session"), (400, 401, 413, 422, 429, 500, 503, 504)),
            }
        },
        "/v1/sessions/{session_id}": {
            "parameters": session,
            "get": {
                "summary": "the session's turn, done flag and worker",
                "responses": _answers(200, OBJECT, (401, 404, 409)),
            },
            "delete": {
                "summary": "close (idempotent)",
                "responses": {
                    "204": {"description": "closed"},
                    "401": {"description": ERROR_MEANING[401], **_json(ERROR)},
                },
            },
        },
        "/v1/sessions/{session_id}/reset": {
            "parameters": session,
            "post": {
                "summary": "start an episode",
                "requestBody": {"required": False, **_json(ref("Reset"))},
                "responses": _answers(200, ref("Observation"), SESSION_ERRORS),
            },
        },
        "/v1/sessions/{session_id}/step": {
            "parameters": session,
            "post": {
                "summary": "take one action (idempotent by turn)",
                "requestBody": body("Step"),
                "responses": _answers(200, ref("StepAnswer"), SESSION_ERRORS),
            },
        },
        "/v1/sessions/{session_id}/state": {
            "parameters": session,
            "get": {"summary": "get_state()", "responses": _answers(200, ref("State"), SESSION_ERRORS)},
            "post": {
                "summary": "set_state(state)",
                "requestBody": body("State"),
                "responses": _answers(200, ref("Observation"), SESSION_ERRORS),
            },
        },
        "/v1/sessions/{session_id}/describe": {
            "parameters": session,
            "get": {
                "summary": "describe() of the session's environment",
                "responses": _answers(200, OBJECT, SESSION_ERRORS),
            },
        },
        "/v1/sessions/{session_id}/extract_action": {
            "parameters": session,
            "post": {
                "summary": "the action and its span in a full model response, by the session's own parser",
                "requestBody": body("Extract"),
                "responses": _answers(200, ref("Extracted"), SESSION_ERRORS),
            },
        },
        "/v1/batch/step": {
            "post": {
                "summary": "step many sessions at once; an error per failed item",
                "requestBody": body("BatchStep"),
                "responses": _answers(200, ref("BatchAnswer"), (400, 401, 413)),
            },
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "agentenvs environment server", "version": protocol.PROTOCOL_VERSION},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }

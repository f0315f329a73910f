"""JSON schemas of the protocol v1 bodies, named as ``agentenvs.protocol.ROUTES`` names them.

They describe exactly what the parsers in ``agentenvs/protocol.py`` accept, so the OpenAPI document built
from them (``servers/document.py``) tells the truth: unknown fields are refused, and where what is valid
depends on the served environments (their names, splits, task ids, action limit) :func:`served_schemas`
fills it in from their descriptions (docs/protocol.md, "The OpenAPI document").
"""

from __future__ import annotations

import json
from typing import Any

from agentenvs.protocol import MAX_BATCH

OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
NATURAL = {"type": "integer", "minimum": 0}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str], properties: dict[str, Any], *, closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "required": required, "properties": properties}
    if closed:
        schema["additionalProperties"] = False
    return schema


STEP_ANSWER = _object(
    ["observation", "reward", "terminated", "truncated", "info"],
    {
        "observation": {"type": "string"},
        "reward": {"type": "number"},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "info": OBJECT,
    },
)
SPAN = _object(["action", "start", "end"], {"action": {"type": "string"}, "start": NATURAL, "end": NATURAL})
SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _object(
        ["error"], {"error": _object(["code", "message"], {"code": {"type": "string"}, "message": {"type": "string"}})}
    ),
    "Health": _object(
        ["status", "protocol", "sessions", "workers_alive", "workers_suspect", "calls_overdue"],
        {
            "status": {"type": "string", "enum": ["ok", "degraded", "draining"]},
            "protocol": {"type": "string"},
            "sessions": NATURAL,
            "workers_alive": NATURAL,
            "workers_suspect": {**NATURAL, "description": "workers being replaced (docs/server.md, suspect workers)"},
            "calls_overdue": {**NATURAL, "description": "calls past their time limit that still hold a worker thread"},
        },
    ),
    "Ready": _object(
        ["ready", "status", "workers_ready"],
        {
            "ready": {"type": "boolean"},
            "status": {"type": "string", "enum": ["ok", "degraded", "draining"]},
            "workers_ready": {**NATURAL, "description": "workers that take new sessions now"},
        },
    ),
    "Metrics": {"type": "string", "description": "Prometheus text format 0.0.4"},
    "Document": OBJECT,
    "Description": {**OBJECT, "required": ["name", "version", "splits", "max_action_chars"]},
    "Envs": _object(
        ["protocol", "envs"],
        {"protocol": {"type": "string"}, "envs": {"type": "object", "additionalProperties": ref("Description")}},
    ),
    "CreateSession": _object(
        ["env"],
        {
            "env": {"type": "string", "description": "a served environment name (GET /v1/envs)"},
            "kwargs": _object([], {})
            | {
                "nullable": True,
                "description": "constructor keywords such as max_turns; the document declares none, because which "
                "ones an environment takes, and how they bound its episodes, depend on the environment",
            },
            "privileged": {"type": "boolean", "default": False, "description": "send info.privileged"},
        },
    ),
    "Session": _object(
        ["session_id", "lease_ttl_s", "step_timeout_s", "env"],
        {
            "session_id": {"type": "string"},
            "lease_ttl_s": {"type": "number"},
            "step_timeout_s": {"type": "number"},
            "env": ref("Description"),
        },
    ),
    "SessionInfo": _object(
        ["session_id", "env", "turn", "done", "privileged", "worker", "worker_pid", "lease_ttl_s"],
        {
            "session_id": {"type": "string"},
            "env": {"type": "string"},
            "turn": NATURAL,
            "done": {"type": "boolean"},
            "privileged": {"type": "boolean"},
            "worker": {**NATURAL, "nullable": True, "description": "null: the server process holds the session"},
            "worker_pid": {"type": "integer", "nullable": True},
            "lease_ttl_s": {"type": "number"},
        },
    ),
    "Reset": _object(
        [],
        {
            "seed": {**NATURAL, "nullable": True},
            "options": {"type": "object", "nullable": True, "description": "task_id and split"},
        },
    ),
    "Observation": _object(["observation", "info"], {"observation": {"type": "string"}, "info": OBJECT}),
    "Step": _object(
        ["action", "turn"],
        {
            "action": {"type": "string", "description": "at most the environment's max_action_chars (413 past it)"},
            "turn": {**NATURAL, "description": "steps this client has already seen"},
        },
    ),
    "StepAnswer": STEP_ANSWER,
    "BatchStep": _object(
        ["steps"],
        {
            "steps": {
                "type": "array",
                "description": f"at most {MAX_BATCH} items (413 past that): a step {{session_id, action, turn}} "
                "or a reset {session_id, reset: {seed, options}}; each item is checked on its own, and a bad one "
                "gets an error in its place in the answer",
                "items": {},
            }
        },
    ),
    "BatchAnswer": _object(
        ["results"],
        {"results": {"type": "array", "items": {"oneOf": [ref("StepAnswer"), ref("Observation"), ref("Error")]}}},
    ),
    "Extract": _object(["response"], {"response": {"type": "string"}}),
    "Extracted": _object(["extracted"], {"extracted": {**SPAN, "nullable": True}}),
    "State": _object(["state"], {"state": OBJECT}),
    "Resolve": _object(
        ["id", "outcome"],
        {
            "id": {"type": "string", "description": "the episode's info.resolution_id (or a question id)"},
            "outcome": {"description": "binary: 1/0 or true/false; choice: an option; numeric: a number"},
            "by_question": {"type": "boolean", "default": False, "description": "id is a question id: resolve all"},
        },
    ),
    "Resolved": _object(["resolved"], {"resolved": NATURAL}),
}


def _unique(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({json.dumps(v, sort_keys=True): v for v in variants}.values())


def _options(descriptions: dict[str, dict[str, Any]], task_ids: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """Reset options valid for the served environments: a split and a task id of that split, or of the default."""
    variants = []
    for name, splits in task_ids.items():
        for split, ids in splits.items():
            task_id = {"type": "string", "enum": [*ids, None], "nullable": True}
            if ids:
                variants.append(_object(["split"], {"split": {"type": "string", "enum": [split]}, "task_id": task_id}))
            if ids and split == descriptions[name].get("default_split"):
                variants.append(_object([], {"task_id": task_id}))
    return {"nullable": True, "anyOf": _unique(variants), "description": "task_id and split"}


def _states(task_ids: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """The states ``set_state`` takes: what ``get_state`` answers, for a served environment, split and task."""
    variants = []
    for name, splits in task_ids.items():
        for split, ids in splits.items():
            properties = {
                "env": {"type": "string", "enum": [name]},
                "split": {"type": "string", "enum": [split]},
                "task_id": {"type": "string", "enum": [*ids, None], "nullable": True},
                "seed": {**NATURAL, "nullable": True},
                "actions": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "the episode's actions so far (no more than the episode is long)",
                },
            }
            if ids:
                variants.append(_object(list(properties), properties, closed=False))
    return {"anyOf": _unique(variants), "description": "an object GET /v1/sessions/{session_id}/state answered"}


def served_schemas(
    descriptions: dict[str, dict[str, Any]], task_ids: dict[str, dict[str, list[str]]]
) -> dict[str, dict[str, Any]]:
    """:data:`SCHEMAS` with what depends on the served environments filled in."""
    schemas = json.loads(json.dumps(SCHEMAS))
    schemas["CreateSession"]["properties"]["env"]["enum"] = sorted(descriptions)
    schemas["Reset"]["properties"]["options"] = _options(descriptions, task_ids)
    schemas["SetState"] = _object(["state"], {"state": _states(task_ids)})
    return schemas

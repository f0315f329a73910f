"""Wire protocol v1 (docs/protocol.md): the route table, request parsing, answers and errors of server and client.

Kept light (no flask, no requests) so the server, the client and tests all read the same rules:
what a valid body is, which error a bad one gets, and how an error answer maps back to an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentenvs import errors
from agentenvs.errors import AgentEnvsError, EnvFailed, InvalidActionType, InvalidArgument
from agentenvs.seeding import check_seed

PROTOCOL_VERSION = "1"
SESSION_ID = re.compile(r"^[0-9a-f]{32}$")
"""Session ids are 128 random bits in lower-case hex."""
ENV_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_BATCH = 1024
"""The most items one ``POST /v1/batch/step`` may carry."""
IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The header of ``POST /v1/sessions`` that makes a retried create answer the session the first attempt opened."""
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9_.:-]{8,128}$")
MAX_DEPTH = 64
"""How deeply the free-form values (``kwargs``, ``options``, ``state``) may nest. Deeper ones are refused with
400 before they reach an environment, where pickling them to a worker or encoding an answer would overflow
the interpreter's stack."""


# ---------------------------------------------------------------------- protocol errors


class MalformedRequest(AgentEnvsError, ValueError):
    """The body is not JSON, not an object, or a field is missing or of the wrong type."""

    code = "malformed_request"
    http_status = 400


class Unauthorized(AgentEnvsError, PermissionError):
    """A token is configured and the request carries none or a wrong one."""

    code = "unauthorized"
    http_status = 401


class UnknownSession(AgentEnvsError, KeyError):
    """No open session has this id for this token (closed, expired, failed, or never opened)."""

    code = "unknown_session"
    http_status = 404

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RouteNotFound(AgentEnvsError, LookupError):
    """No route has this path."""

    code = "not_found"
    http_status = 404


class MethodNotAllowed(AgentEnvsError, ValueError):
    """The route exists but not with this HTTP method."""

    code = "method_not_allowed"
    http_status = 405


class TurnMismatch(AgentEnvsError, RuntimeError):
    """``turn`` in a step is neither the session's turn nor a retry of its last step."""

    code = "turn_mismatch"
    http_status = 409


class SessionBusy(AgentEnvsError, RuntimeError):
    """Another request on the same session is still running."""

    code = "session_busy"
    http_status = 409


class RequestTooLarge(AgentEnvsError, ValueError):
    """The body is over the server's request size limit."""

    code = "request_too_large"
    http_status = 413


class AtCapacity(AgentEnvsError, RuntimeError):
    """The server holds its maximum number of sessions; retry after ``retry_after`` seconds."""

    code = "at_capacity"
    http_status = 429

    def __init__(self, message: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ShuttingDown(AgentEnvsError, RuntimeError):
    """The server is draining after SIGTERM and takes no new sessions."""

    code = "shutting_down"
    http_status = 503


class StepTimeout(AgentEnvsError, TimeoutError):
    """A call ran past the server's time limit; the session is closed."""

    code = "step_timeout"
    http_status = 504


class WorkerLost(EnvFailed):
    """The worker process holding the session died or was replaced (it stopped answering); the session is closed."""

    code = "worker_lost"
    http_status = 500


class ServerUnreachable(AgentEnvsError, ConnectionError):
    """Client side: the server could not be reached (after retries where the call allowed them)."""

    code = "server_unreachable"
    http_status = 503


PROTOCOL_ERRORS: tuple[type[AgentEnvsError], ...] = (
    MalformedRequest,
    Unauthorized,
    UnknownSession,
    RouteNotFound,
    MethodNotAllowed,
    TurnMismatch,
    SessionBusy,
    RequestTooLarge,
    AtCapacity,
    ShuttingDown,
    StepTimeout,
    WorkerLost,
    ServerUnreachable,
)


def error_class(code: str) -> type[AgentEnvsError]:
    """The exception class of a wire error ``code``: protocol errors first, then ``errors.error_for_code``."""
    for cls in PROTOCOL_ERRORS:
        if cls.code == code:
            return cls
    return errors.error_for_code(code)


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_from_answer(status: int, body: Any, retry_after: str | None = None) -> AgentEnvsError:
    """The exception an error answer stands for (a non-JSON answer becomes the base class)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = str(body["error"].get("code", "error"))
        message = str(body["error"].get("message", ""))
    else:
        by_status = {cls.http_status: cls for cls in PROTOCOL_ERRORS if cls not in (ServerUnreachable, WorkerLost)}
        code = by_status[status].code if status in by_status else "error"
        message = f"HTTP {status}: {str(body)[:200]}"
    cls = error_class(code)
    if cls is AtCapacity:
        return AtCapacity(message, retry_after=float(retry_after) if retry_after else None)
    exc = cls(message)
    if status:
        exc.http_status = status
    return exc


# ---------------------------------------------------------------------- requests


def parse_json_object(raw: bytes, *, empty_ok: bool = False) -> dict[str, Any]:
    """A request body as a JSON object, or :class:`MalformedRequest` saying what is wrong."""
    if not raw.strip():
        if empty_ok:
            return {}
        raise MalformedRequest("the request needs a JSON object body (Content-Type: application/json)")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedRequest(f"the body is not valid JSON ({exc}); send a JSON object") from None
    except RecursionError:
        raise MalformedRequest(f"the body nests too deeply; values may nest at most {MAX_DEPTH} levels") from None
    if not isinstance(body, dict):
        raise MalformedRequest(f"the body must be a JSON object, got a JSON {type(body).__name__}")
    return body


def check_depth(value: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a free-form value nested deeper than ``limit`` levels (iteratively: no recursion to overflow)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise MalformedRequest(f"{what} nests more than {limit} levels deep; send a flatter value")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _preview(value: Any) -> str:
    """The start of a value's JSON for an error message (a type name where encoding it would recurse too deep)."""
    try:
        return json.dumps(value)[:60]
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"


def _check_fields(body: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise MalformedRequest(f"unknown fields {sorted(unknown)} in {what}; accepted: {sorted(allowed)}")


def _require(body: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str, hint: str) -> Any:
    if name not in body:
        raise MalformedRequest(f"{what} is missing the field {name!r} ({hint})")
    value = body[name]
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise MalformedRequest(f"{what}: {name!r} must be {hint}, got {_preview(value)}")
    return value


@dataclass(frozen=True)
class CreateSession:
    env: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    privileged: bool = False

    @classmethod
    def parse(cls, body: dict[str, Any]) -> CreateSession:
        what = "POST /v1/sessions"
        _check_fields(body, {"env", "kwargs", "privileged"}, what)
        env = _require(body, "env", str, what, 'the name of a served environment, e.g. "bandit"')
        if not ENV_NAME.match(env):
            raise errors.UnknownEnv(f"no environment named {env[:64]!r} is served here; GET /v1/envs lists them")
        kwargs = body.get("kwargs")
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(kwargs, dict):
            raise MalformedRequest(f"{what}: 'kwargs' must be a JSON object of constructor keywords")
        check_depth(kwargs, f"{what}: 'kwargs'")
        privileged = body.get("privileged", False)
        if not isinstance(privileged, bool):
            raise MalformedRequest(f"{what}: 'privileged' must be true or false")
        return cls(env=env, kwargs=kwargs, privileged=privileged)

    def to_json(self) -> dict[str, Any]:
        return {"env": self.env, "kwargs": self.kwargs, "privileged": self.privileged}


@dataclass(frozen=True)
class ResetRequest:
    seed: int | None = None
    options: dict[str, Any] | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> ResetRequest:
        _check_fields(body, {"seed", "options"}, "reset")
        seed = check_seed(body.get("seed"))
        options = body.get("options")
        if options is not None and not isinstance(options, dict):
            raise InvalidArgument('options must be a JSON object such as {"task_id": ..., "split": ...}')
        if options is not None:
            check_depth(options, "reset: 'options'")
        return cls(seed=seed, options=options)

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "options": self.options}


Reset = ResetRequest
"""A reset, passed to ``step_many`` in place of an action: that session starts its next episode in the
same batch call, so the reset costs no round trip of its own; its result is ``(observation, info)``."""


def _parse_turn(body: dict[str, Any], what: str) -> int:
    turn = _require(body, "turn", int, what, "the number of steps this client has already seen, an integer >= 0")
    if turn < 0:
        raise MalformedRequest(f"{what}: 'turn' must be >= 0, got {turn}")
    return turn


def _parse_action(body: dict[str, Any], what: str) -> str:
    if "action" not in body:
        raise MalformedRequest(f"{what} is missing the field 'action' (the action text, a string)")
    action = body["action"]
    if not isinstance(action, str):
        raise InvalidActionType(f"the action must be a string, got {_preview(action)}")
    return action


@dataclass(frozen=True)
class StepRequest:
    action: str
    turn: int

    @classmethod
    def parse(cls, body: dict[str, Any]) -> StepRequest:
        _check_fields(body, {"action", "turn"}, "step")
        return cls(action=_parse_action(body, "step"), turn=_parse_turn(body, "step"))

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "turn": self.turn}


@dataclass(frozen=True)
class BatchItem:
    """A step in a batch."""

    session_id: str
    action: str
    turn: int


@dataclass(frozen=True)
class BatchReset:
    """A reset in a batch: the session starts a new episode, answered as ``POST .../reset`` answers."""

    session_id: str
    request: ResetRequest


def parse_batch(body: dict[str, Any]) -> list[BatchItem | BatchReset | AgentEnvsError]:
    """The items of a batch step; a bad item becomes its error, so the other items still run."""
    _check_fields(body, {"steps"}, "POST /v1/batch/step")
    steps = body.get("steps")
    if not isinstance(steps, list):
        raise MalformedRequest('POST /v1/batch/step needs {"steps": [{"session_id", "action", "turn"}, ...]}')
    if len(steps) > MAX_BATCH:
        raise RequestTooLarge(f"a batch holds at most {MAX_BATCH} steps, got {len(steps)}; split it")
    items: list[BatchItem | BatchReset | AgentEnvsError] = []
    for index, item in enumerate(steps):
        try:
            items.append(_parse_batch_item(item, f"steps[{index}]"))
        except AgentEnvsError as exc:
            items.append(exc)
    return items


def _parse_batch_item(item: Any, what: str) -> BatchItem | BatchReset:
    if not isinstance(item, dict):
        raise MalformedRequest(f"{what} must be an object {{session_id, action, turn}} or {{session_id, reset}}")
    _check_fields(item, {"session_id", "reset"} if "reset" in item else {"session_id", "action", "turn"}, what)
    session_id = _require(item, "session_id", str, what, "a session id from POST /v1/sessions")
    if "reset" not in item:
        return BatchItem(session_id, _parse_action(item, what), _parse_turn(item, what))
    reset = item["reset"]
    if not isinstance(reset, dict):
        raise MalformedRequest(f'{what}: \'reset\' must be an object such as {{"seed": 0, "options": {{}}}}')
    return BatchReset(session_id, ResetRequest.parse(reset))


def parse_state(body: dict[str, Any]) -> dict[str, Any]:
    _check_fields(body, {"state"}, "POST /v1/sessions/{id}/state")
    state = body.get("state")
    if not isinstance(state, dict):
        raise InvalidArgument('set_state needs {"state": <the object GET /v1/sessions/{id}/state returned>}')
    check_depth(state, "set_state: 'state'")
    return state


def parse_extract(body: dict[str, Any]) -> str:
    what = "POST /v1/sessions/{id}/extract_action"
    _check_fields(body, {"response"}, what)
    return _require(body, "response", str, what, "the full model response, a string")


def parse_resolve(body: dict[str, Any]) -> tuple[str, Any, bool]:
    """``(id, outcome, by_question)`` of a POST /v1/predictions/resolve body."""
    what = "POST /v1/predictions/resolve"
    _check_fields(body, {"id", "outcome", "by_question"}, what)
    ident = _require(body, "id", str, what, "a resolution_id (or a question id with by_question: true)")
    if "outcome" not in body:
        raise MalformedRequest(f"{what} needs 'outcome': 1/0 (binary), an option (choice) or a number (numeric)")
    by_question = body.get("by_question", False)
    if not isinstance(by_question, bool):
        raise MalformedRequest(f"{what}: 'by_question' must be true or false")
    return ident, body["outcome"], by_question


# ---------------------------------------------------------------------- answers


@dataclass(frozen=True)
class StepAnswer:
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> StepAnswer:
        return cls(
            observation=body["observation"],
            reward=float(body["reward"]),
            terminated=bool(body["terminated"]),
            truncated=bool(body["truncated"]),
            info=body["info"],
        )

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info


def step_answer(observation: str, reward: float, terminated: bool, truncated: bool, info: dict) -> dict[str, Any]:
    return {
        "observation": observation,
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "info": info,
    }


_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)
"""Built once: ``json.dumps`` with these options builds an encoder per call, a tenth of encoding a step answer."""


def dumps(value: Any) -> bytes:
    """The JSON encoding used on the wire (ASCII, so lone surrogates and odd bytes travel safely)."""
    return _ENCODER.encode(value).encode("ascii")


# ---------------------------------------------------------------------- the route table


@dataclass(frozen=True)
class Link:
    """An OpenAPI link: after this route succeeds, ``target`` can be called on the same session."""

    target: str
    body: Any = None
    """The target's request body as an OpenAPI runtime expression or literal (None: generated from its schema)."""


@dataclass(frozen=True)
class Route:
    """One route of protocol v1. The flask app, the client and the OpenAPI document are all built from these."""

    name: str
    """The flask endpoint, the OpenAPI ``operationId`` and the client's :meth:`Client.call` name."""
    method: str
    path: str
    summary: str
    ok: int = 200
    request: str | None = None
    """The name of the request body's schema (``agentenvs/protocol_schemas.py``), if it takes one."""
    body_required: bool = True
    answer: str | None = None
    """The name of the success answer's schema; None for an answer without a JSON body."""
    errors: tuple[int, ...] = ()
    auth: bool = True
    links: tuple[Link, ...] = ()
    content: str = "application/json"
    any_id: bool = False
    """A session route that takes any string as the id (DELETE: closing what is not open is not an error)."""
    idempotency_key: bool = False
    """It takes an ``Idempotency-Key`` header (``IDEMPOTENCY_HEADER``): a retry gets the first attempt's answer."""

    @property
    def flask_rule(self) -> str:
        return self.path.replace("{session_id}", "<session_id>")

    def url(self, session_id: str | None = None) -> str:
        """The path of a call, with ``session_id`` filled in for the session routes."""
        return self.path if session_id is None else self.path.replace("{session_id}", session_id)


SESSION_ERRORS = (400, 401, 404, 409, 413, 422, 500, 504)
_SESSION_LINKS = tuple(
    Link(name) for name in ("session_info", "reset", "step", "get_state", "describe", "extract_action", "close")
)
ROUTES: tuple[Route, ...] = (
    Route("healthz", "GET", "/healthz", "liveness (no token needed)", answer="Health", errors=(503,), auth=False),
    Route("readyz", "GET", "/readyz", "readiness: whether a session can be opened now (no token needed)",
          answer="Ready", errors=(503,), auth=False),
    Route("metrics", "GET", "/metrics", "Prometheus text", answer="Metrics", errors=(401,), content="text/plain"),
    Route("openapi", "GET", "/v1/openapi.json", "this document", answer="Document", errors=(401,)),
    Route("envs", "GET", "/v1/envs", "served environments: names, versions, splits, capabilities", answer="Envs",
          errors=(401,)),
    Route("create_session", "POST", "/v1/sessions", "open a session", ok=201, request="CreateSession",
          answer="Session", errors=(400, 401, 413, 422, 429, 500, 503, 504), links=_SESSION_LINKS,
          idempotency_key=True),
    Route("session_info", "GET", "/v1/sessions/{session_id}", "the session's turn, done flag and worker",
          answer="SessionInfo", errors=(401, 404, 409)),
    Route("close", "DELETE", "/v1/sessions/{session_id}", "close (idempotent: any id answers 204)", ok=204,
          errors=(401,), any_id=True),
    Route("reset", "POST", "/v1/sessions/{session_id}/reset", "start an episode", request="Reset",
          body_required=False, answer="Observation", errors=SESSION_ERRORS,
          links=(Link("step", {"action": "", "turn": 0}), Link("get_state"))),
    Route("step", "POST", "/v1/sessions/{session_id}/step", "take one action (idempotent by turn)", request="Step",
          answer="StepAnswer", errors=SESSION_ERRORS, links=(Link("session_info"),)),
    Route("get_state", "GET", "/v1/sessions/{session_id}/state", "get_state()", answer="State",
          errors=SESSION_ERRORS, links=(Link("set_state", "$response.body"),)),
    Route("set_state", "POST", "/v1/sessions/{session_id}/state", "set_state(state)", request="SetState",
          answer="Observation", errors=SESSION_ERRORS),
    Route("describe", "GET", "/v1/sessions/{session_id}/describe", "describe() of the session's environment",
          answer="Description", errors=SESSION_ERRORS),
    Route("extract_action", "POST", "/v1/sessions/{session_id}/extract_action",
          "the action and its span in a full model response, by the session's own parser", request="Extract",
          answer="Extracted", errors=SESSION_ERRORS),
    Route("batch_step", "POST", "/v1/batch/step", "step many sessions at once; an error per failed item",
          request="BatchStep", answer="BatchAnswer", errors=(400, 401, 413)),
    Route("resolve_predictions", "POST", "/v1/predictions/resolve",
          "resolve stored forecasts with a real outcome (a server with a token only; docs/forecast.md)",
          request="Resolve", answer="Resolved", errors=(400, 401, 404, 409, 413, 422)),
)  # fmt: skip
ROUTE = {route.name: route for route in ROUTES}

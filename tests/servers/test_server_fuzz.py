"""A bounded hypothesis fuzz of every route: random methods, ids, JSON and raw bodies on a real server.

Whatever arrives, the answer is a success or a JSON error of the protocol (never an internal error),
and the server keeps serving.
"""

from __future__ import annotations

import json

from conftest import Api, error_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentenvs import protocol

KNOWN_CODES = {
    "malformed_request", "unknown_session", "not_found", "method_not_allowed", "turn_mismatch", "session_busy",
    "request_too_large", "invalid_action_type", "action_too_long", "invalid_argument", "unknown_env",
    "unknown_split", "unknown_task", "reset_needed", "episode_over", "at_capacity",
    "unauthorized",  # POST /v1/predictions/resolve on a server without a token
}  # fmt: skip
ROUTES = [(route.method, route.path.replace("{session_id}", "{id}")) for route in protocol.ROUTES]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["env", "kwargs", "privileged", "seed", "options", "action", "turn", "steps", "state", "response", "id", "outcome"]
)
bodies = st.one_of(
    st.dictionaries(field_names, json_values, max_size=4).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
)


def test_the_served_document_has_every_route_of_the_table(api: Api) -> None:
    document = api.call("GET", "/v1/openapi.json").json()
    operations = {(m.upper(), path) for path, item in document["paths"].items() for m in item}
    assert operations == {(route.method, route.path) for route in protocol.ROUTES}
    assert "security" not in document, "a server without a token must not declare one"
    assert document["components"]["schemas"]["CreateSession"]["properties"]["env"]["enum"] == ["bandit", "counter"]


def test_fuzz_every_route(api: Api) -> None:
    live = api.open("bandit")
    api.reset(live)
    ids = st.sampled_from([live, "0" * 32, "xyz", "%00", "a" * 300, "..", "%2e%2e"])

    @settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(route=st.sampled_from(ROUTES), session_id=ids, body=bodies, method=st.sampled_from(["GET", "POST", "PUT"]))
    def hit(route: tuple[str, str], session_id: str, body: bytes, method: str) -> None:
        verb = route[0] if method != "PUT" else "PUT"
        path = route[1].replace("{id}", session_id)
        answer = api.call(verb, path, raw=body, headers={"Content-Type": "application/json"})
        if answer.status_code < 400:
            return
        error = error_of(answer)
        assert answer.status_code < 500, f"{verb} {path} {body[:80]!r} -> {answer.status_code} {error}"
        assert error["code"] in KNOWN_CODES, error

    hit()
    assert api.healthy()
    assert api.call("GET", "/v1/envs").status_code == 200

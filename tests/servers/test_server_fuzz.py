"""A bounded hypothesis fuzz of every route: random methods, ids, JSON and raw bodies on a real server.

Whatever arrives, the answer is a success or a JSON error of the protocol (never an internal error),
and the server keeps serving.
"""

from __future__ import annotations

import json

from conftest import Api, error_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentenvs.servers.document import openapi_document

KNOWN_CODES = {
    "malformed_request", "unknown_session", "not_found", "method_not_allowed", "turn_mismatch", "session_busy",
    "request_too_large", "invalid_action_type", "action_too_long", "invalid_argument", "unknown_env",
    "unknown_split", "unknown_task", "reset_needed", "episode_over", "at_capacity",
}  # fmt: skip
ROUTES = [
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/envs"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/{id}"),
    ("DELETE", "/v1/sessions/{id}"),
    ("POST", "/v1/sessions/{id}/reset"),
    ("POST", "/v1/sessions/{id}/step"),
    ("GET", "/v1/sessions/{id}/state"),
    ("POST", "/v1/sessions/{id}/state"),
    ("GET", "/v1/sessions/{id}/describe"),
    ("POST", "/v1/batch/step"),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["env", "kwargs", "privileged", "seed", "options", "action", "turn", "steps", "state", "response"]
)
bodies = st.one_of(
    st.dictionaries(field_names, json_values, max_size=4).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
)


def test_every_route_is_in_the_openapi_document() -> None:
    paths = openapi_document()["paths"]
    for method, route in ROUTES:
        assert method.lower() in paths[route.replace("{id}", "{session_id}")], (method, route)


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

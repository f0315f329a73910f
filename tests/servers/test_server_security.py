"""Bearer tokens, sessions bound to the token that opened them, and unguessable ids."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Api, error_of, start

from agentenvs import protocol
from agentenvs.servers.launch import ServerProcess


@pytest.fixture(scope="module")
def guarded() -> Iterator[ServerProcess]:
    process = start(workers=1, token="alpha-token", args=("--token", "beta-token"))
    try:
        yield process
    finally:
        process.stop()


def test_every_route_but_the_probes_needs_a_token(guarded: ServerProcess) -> None:
    anonymous, wrong = Api(guarded.url), Api(guarded.url, token="nope")
    assert anonymous.call("GET", "/healthz").status_code == 200
    assert anonymous.call("GET", "/readyz").json()["ready"] is True
    for client in (anonymous, wrong):
        for method, path in [
            ("GET", "/v1/envs"),
            ("GET", "/metrics"),
            ("GET", "/v1/openapi.json"),
            ("POST", "/v1/sessions"),
        ]:
            answer = client.call(method, path, {"env": "counter"})
            assert answer.status_code == 401 and error_of(answer)["code"] == "unauthorized", (method, path)
            assert answer.headers["WWW-Authenticate"] == "Bearer"
        refused = client.call("POST", "/v1/sessions", {"env": "counter"})
        assert refused.status_code == 401 and error_of(refused)["code"] == "unauthorized"
    basic = anonymous.call("GET", "/v1/envs", headers={"Authorization": "Basic YWxwaGEtdG9rZW4="})
    assert basic.status_code == 401


def test_a_session_answers_only_the_token_that_opened_it(guarded: ServerProcess) -> None:
    alpha, beta = Api(guarded.url, token="alpha-token"), Api(guarded.url, token="beta-token")
    session = alpha.open()
    alpha.reset(session)
    for answer in (
        beta.step(session, "inc", 0),
        beta.call("GET", f"/v1/sessions/{session}"),
        beta.call("GET", f"/v1/sessions/{session}/state"),
        beta.call("POST", "/v1/batch/step", {"steps": [{"session_id": session, "action": "inc", "turn": 0}]}),
    ):
        body = answer.json()
        error = body["results"][0]["error"] if "results" in body else error_of(answer)
        assert error["code"] == "unknown_session"
    assert beta.call("DELETE", f"/v1/sessions/{session}").status_code == 204
    assert alpha.step(session, "inc", 0).status_code == 200, "another token's DELETE must not close the session"


def test_an_idempotency_key_is_a_key_of_the_token_that_sent_it(guarded: ServerProcess) -> None:
    alpha, beta = Api(guarded.url, token="alpha-token"), Api(guarded.url, token="beta-token")
    key = {protocol.IDEMPOTENCY_HEADER: "shared-key-0001"}
    mine = alpha.call("POST", "/v1/sessions", {"env": "counter"}, headers=key).json()["session_id"]
    theirs = beta.call("POST", "/v1/sessions", {"env": "counter"}, headers=key).json()["session_id"]
    assert mine != theirs, "another token's key must not reach this token's session"
    assert alpha.call("POST", "/v1/sessions", {"env": "counter"}, headers=key).json()["session_id"] == mine
    alpha.call("DELETE", f"/v1/sessions/{mine}")
    beta.call("DELETE", f"/v1/sessions/{theirs}")


def test_session_ids_are_128_random_bits(guarded: ServerProcess) -> None:
    alpha = Api(guarded.url, token="alpha-token")
    ids = [alpha.open() for _ in range(20)]
    assert len(set(ids)) == len(ids)
    assert all(protocol.SESSION_ID.match(i) for i in ids)
    for session in ids:
        alpha.call("DELETE", f"/v1/sessions/{session}")

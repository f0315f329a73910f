"""Protocol v1 on a real server: the routes, idempotent retries, batch steps, and every bad input of the issue."""

from __future__ import annotations

import io
import threading
import time

import pytest
from conftest import Api, error_of

from agentenvs.servers.app import drain_body


def test_envs_health_openapi_and_metrics(api: Api) -> None:
    envs = api.call("GET", "/v1/envs").json()
    assert envs["protocol"] == "1"
    assert envs["envs"]["bandit"]["name"] == "bandit" and "splits" in envs["envs"]["counter"]
    health = api.call("GET", "/healthz").json()
    assert health["status"] == "ok" and health["workers_alive"] == 2
    document = api.call("GET", "/v1/openapi.json").json()
    assert document["openapi"].startswith("3.") and "/v1/batch/step" in document["paths"]
    api.step(api.open(), "inc", 0)
    metrics = api.call("GET", "/metrics")
    assert metrics.headers["Content-Type"].startswith("text/plain")
    for name in ("agentenvs_sessions_active", "agentenvs_request_duration_seconds_bucket", "agentenvs_errors_total"):
        assert name in metrics.text
    assert 'agentenvs_errors_total{code="reset_needed"}' in metrics.text


def test_session_round_trip_and_idempotent_delete(api: Api) -> None:
    session = api.open()
    first = api.reset(session, seed=5)
    assert first["info"]["turn"] == 0 and first["observation"].startswith("count")
    answer = api.step(session, "inc", 0).json()
    assert answer["reward"] == 1.0 and answer["info"]["turn"] == 1 and answer["info"]["action_valid"] is True
    state = api.call("GET", f"/v1/sessions/{session}/state").json()["state"]
    assert state["actions"] == ["inc"]
    restored = api.call("POST", f"/v1/sessions/{session}/state", {"state": state}).json()
    assert restored["info"]["turn"] == 1
    assert api.call("GET", f"/v1/sessions/{session}/describe").json()["name"] == "counter"
    response = "thinking...\n<action> inc </action>"
    extracted = api.call("POST", f"/v1/sessions/{session}/extract_action", {"response": response}).json()
    start = response.index("inc")
    assert extracted == {"extracted": {"action": "inc", "start": start, "end": start + 3}}
    bad = api.call("POST", f"/v1/sessions/{session}/extract_action", {"response": 3})
    assert bad.status_code == 400 and error_of(bad)["code"] == "malformed_request"
    assert api.call("DELETE", f"/v1/sessions/{session}").status_code == 204
    assert api.call("DELETE", f"/v1/sessions/{session}").status_code == 204
    gone = api.step(session, "inc", 1)
    assert gone.status_code == 404 and "closed" in error_of(gone)["message"]


def test_retried_turn_gets_the_stored_answer_without_stepping_twice(api: Api) -> None:
    session = api.open()
    api.reset(session)
    first = api.step(session, "inc", 0)
    again = api.step(session, "inc", 0)
    assert again.status_code == 200 and again.content == first.content
    assert api.call("GET", f"/v1/sessions/{session}").json()["turn"] == 1
    for wrong in (5, 2):
        mismatch = api.step(session, "inc", wrong)
        assert mismatch.status_code == 409 and error_of(mismatch)["code"] == "turn_mismatch"
        assert "send turn=1" in error_of(mismatch)["message"]
    assert api.step(session, "inc", 1).json()["info"]["turn"] == 2


def test_batch_step_with_an_error_per_failed_item(api: Api) -> None:
    sessions = [api.open() for _ in range(4)]
    for session in sessions:
        api.reset(session)
    steps = [{"session_id": s, "action": "inc", "turn": 0} for s in sessions]
    steps += [
        {"session_id": "f" * 32, "action": "inc", "turn": 0},
        {"session_id": sessions[0], "action": "inc", "turn": 7},
        {"session_id": sessions[1], "action": 5, "turn": 0},
        "not an object",
    ]
    answer = api.call("POST", "/v1/batch/step", {"steps": steps})
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert len(results) == len(steps)
    assert all(r["info"]["turn"] == 1 and r["reward"] == 1.0 for r in results[:4])
    codes = [r["error"]["code"] for r in results[4:]]
    assert codes == ["unknown_session", "session_busy", "invalid_action_type", "malformed_request"]
    retried = api.call("POST", "/v1/batch/step", {"steps": steps[:4]}).json()["results"]
    assert retried == results[:4], "a retried batch (same turns) must get the stored answers"


def test_batch_resets_and_steps_in_one_call(api: Api) -> None:
    """A reset item starts a session's next episode in the call that steps the others (inline and worker envs)."""
    counters = [api.open() for _ in range(3)]
    bandit = api.open("bandit")
    for session in counters[:2]:
        api.reset(session)
    api.step(counters[1], "inc", 0)
    items = [
        {"session_id": counters[0], "action": "inc", "turn": 0},
        {"session_id": counters[1], "reset": {"seed": 3}},
        {"session_id": counters[2], "reset": {}},
        {"session_id": bandit, "reset": {"seed": 1, "options": {"split": "test"}}},
        {"session_id": "f" * 32, "reset": {}},
        {"session_id": counters[0], "reset": {"seed": -1}},
        {"session_id": counters[0], "reset": {}, "turn": 0},
        {"session_id": counters[2], "reset": 5},
    ]
    results = api.call("POST", "/v1/batch/step", {"steps": items}).json()["results"]
    assert results[0]["info"]["turn"] == 1 and results[0]["reward"] == 1.0
    for reset in results[1:4]:
        assert set(reset) == {"observation", "info"} and reset["info"]["turn"] == 0
    codes = [r["error"]["code"] for r in results[4:]]
    assert codes == ["unknown_session", "invalid_argument", "malformed_request", "malformed_request"]
    restarted = api.call("POST", "/v1/batch/step", {"steps": [{"session_id": counters[1], "reset": {"seed": 3}}]})
    assert api.call("GET", f"/v1/sessions/{counters[1]}").json()["turn"] == 0
    assert restarted.json()["results"][0] == results[1], "the same seed must start the same episode"
    stale = api.step(counters[1], "inc", 1)
    assert stale.status_code == 409, "a reset forgets the stored step: its turn does not repeat"
    assert api.step(counters[1], "inc", 0).json()["info"]["turn"] == 1
    assert api.step(bandit, "pull[0]", 0).status_code == 200
    for session in [*counters, bandit]:
        api.call("DELETE", f"/v1/sessions/{session}")


def test_privileged_info_only_for_privileged_sessions(api: Api) -> None:
    plain, privileged = api.open(), api.open(privileged=True)
    assert "privileged" not in api.reset(plain)["info"]
    assert api.reset(privileged)["info"]["privileged"]["target"] >= 3


BAD_BODIES = [
    (b"{not json", 400, "malformed_request"),
    (b"[1, 2]", 400, "malformed_request"),
    (b'"a string"', 400, "malformed_request"),
    (b"\xff\xfe\x00", 400, "malformed_request"),
    (b"", 400, "malformed_request"),
    (b'{"action": "inc"}', 400, "malformed_request"),
    (b'{"turn": 0}', 400, "malformed_request"),
    (b'{"action": "inc", "turn": "zero"}', 400, "malformed_request"),
    (b'{"action": "inc", "turn": -1}', 400, "malformed_request"),
    (b'{"action": "inc", "turn": true}', 400, "malformed_request"),
    (b'{"action": "inc", "turn": 0, "extra": 1}', 400, "malformed_request"),
    (b'{"action": 17, "turn": 0}', 422, "invalid_action_type"),
    (b'{"action": null, "turn": 0}', 422, "invalid_action_type"),
    (b'{"action": "' + b"x" * 65 + b'", "turn": 0}', 413, "action_too_long"),
]


@pytest.mark.parametrize(("raw", "status", "code"), BAD_BODIES)
def test_bad_step_bodies(api: Api, raw: bytes, status: int, code: str) -> None:
    session = api.open()
    api.reset(session)
    answer = api.call("POST", f"/v1/sessions/{session}/step", raw=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert error_of(answer)["code"] == code
    assert api.step(session, "inc", 0).status_code == 200, "the session must still work after a bad request"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 400, "malformed_request"),
        ({"env": 3}, 400, "malformed_request"),
        ({"env": "nope"}, 422, "unknown_env"),
        ({"env": "../../etc/passwd"}, 422, "unknown_env"),
        ({"env": "counter", "kwargs": []}, 400, "malformed_request"),
        ({"env": "counter", "kwargs": {"colour": "red"}}, 422, "invalid_argument"),
        ({"env": "counter", "kwargs": {"max_turns": -2}}, 422, "invalid_argument"),
        ({"env": "counter", "kwargs": {"data_dir": "/etc"}}, 422, "invalid_argument"),
        ({"env": "counter", "kwargs": {"privileged": True}}, 422, "invalid_argument"),
        ({"env": "counter", "privileged": "yes"}, 400, "malformed_request"),
    ],
)
def test_bad_session_requests(api: Api, body: dict, status: int, code: str) -> None:
    answer = api.call("POST", "/v1/sessions", body)
    assert answer.status_code == status, answer.text
    assert error_of(answer)["code"] == code


def test_bad_reset_and_state(api: Api) -> None:
    session = api.open()
    cases = [
        ("reset", {"seed": -1}, "invalid_argument"),
        ("reset", {"seed": "7"}, "invalid_argument"),
        ("reset", {"options": {"split": "nope"}}, "unknown_split"),
        ("reset", {"options": {"task_id": "nope"}}, "unknown_task"),
        ("reset", {"options": {"colour": 1}}, "invalid_argument"),
        ("reset", {"options": "x"}, "invalid_argument"),
        ("state", {"state": {"not": "a state"}}, "invalid_argument"),
        ("state", {"state": 3}, "invalid_argument"),
    ]
    for route, body, code in cases:
        answer = api.call("POST", f"/v1/sessions/{session}/{route}", body)
        assert answer.status_code == 422 and error_of(answer)["code"] == code, (route, body, answer.text)
    assert api.call("POST", f"/v1/sessions/{session}/reset", raw=b"").status_code == 200, "an empty reset body is ok"


def test_step_before_reset_and_after_the_end(api: Api) -> None:
    session = api.open()
    early = api.step(session, "inc", 0)
    assert early.status_code == 409 and error_of(early)["code"] == "reset_needed"
    api.reset(session)
    assert api.step(session, "finish", 0).json()["terminated"] is True
    late = api.step(session, "inc", 1)
    assert late.status_code == 409 and error_of(late)["code"] == "episode_over"


def test_huge_bodies_unknown_routes_and_ids(api: Api) -> None:
    session = api.open()
    # Many times, on one keep-alive connection: the client is still sending when the 413 goes out, and an
    # answer sent before the body was read used to be lost to a connection reset now and then.
    for size in [(2 + i % 6) << 20 for i in range(12)]:
        huge = api.call("POST", f"/v1/sessions/{session}/step", raw=b"x" * size)
        assert huge.status_code == 413 and error_of(huge)["code"] == "request_too_large"
    big_batch = {"steps": [{"session_id": session, "action": "inc", "turn": 0}] * 1025}
    assert error_of(api.call("POST", "/v1/batch/step", big_batch))["code"] == "request_too_large"
    for method, path, status, code in [
        ("GET", "/v2/nothing", 404, "not_found"),
        ("GET", "/v1/sessions", 405, "method_not_allowed"),
        ("PUT", f"/v1/sessions/{session}/step", 405, "method_not_allowed"),
        ("POST", "/v1/sessions/abc/step", 404, "unknown_session"),
        ("POST", f"/v1/sessions/{'0' * 32}/step", 404, "unknown_session"),
        ("POST", "/v1/sessions/..%2F..%2Fetc/step", 404, "not_found"),
    ]:
        answer = api.call(method, path, {"action": "inc", "turn": 0})
        assert answer.status_code == status and error_of(answer)["code"] == code, (method, path, answer.text)
        if status == 405:
            assert "POST" in answer.headers["Allow"] or "DELETE" in answer.headers["Allow"], answer.headers
    assert api.healthy()


def test_two_concurrent_steps_on_one_session(api: Api) -> None:
    session = api.open()
    api.reset(session)
    answers: list = []
    slow = threading.Thread(target=lambda: answers.append(Api(api.url).step(session, "sleep 1.0", 0)))
    slow.start()
    try:
        for _ in range(400):
            busy = api.call("GET", f"/v1/sessions/{session}")
            if busy.status_code == 409:
                break
            time.sleep(0.005)
        assert error_of(busy)["code"] == "session_busy"
        second = api.step(session, "inc", 0)
        assert second.status_code == 409 and error_of(second)["code"] == "session_busy"
    finally:
        slow.join()
    assert answers[0].status_code == 200
    assert api.step(session, "inc", 1).status_code == 200


def test_drain_body_stops_at_its_byte_limit() -> None:
    assert drain_body(io.BytesIO(b"x" * 1000), limit=4096)
    assert not drain_body(io.BytesIO(b"x" * 1000), limit=100)


@pytest.mark.parametrize("depth", [65, 500, 990, 100_000])
def test_deeply_nested_bodies_get_a_4xx_on_every_route(api: Api, depth: int) -> None:
    session = api.open()
    nested = b"[" * depth + b"]" * depth
    for path, raw in [
        ("/v1/sessions", b'{"env": "counter", "kwargs": {"a": ' + nested + b"}}"),
        (f"/v1/sessions/{session}/reset", b'{"options": {"split": ' + nested + b"}}"),
        (f"/v1/sessions/{session}/state", b'{"state": {"actions": ' + nested + b"}}"),
        (f"/v1/sessions/{session}/step", b'{"action": ' + nested + b', "turn": 0}'),
        (f"/v1/sessions/{session}/extract_action", b'{"response": ' + nested + b"}"),
        ("/v1/batch/step", b'{"steps": [' + nested + b"]}"),
    ]:
        answer = api.call("POST", path, raw=raw, headers={"Content-Type": "application/json"})
        assert 400 <= answer.status_code < 500 or (answer.status_code == 200 and path == "/v1/batch/step"), (
            path,
            depth,
            answer.text[:200],
        )
        if answer.status_code >= 400:
            assert error_of(answer)["code"] in {"malformed_request", "invalid_action_type"}, (path, answer.text[:200])
    assert api.healthy() and api.reset(session)["info"]["turn"] == 0

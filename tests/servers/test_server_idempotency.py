"""Idempotency keys of POST /v1/sessions on a real server: a retried create answers the first attempt's session."""

from __future__ import annotations

import threading

from conftest import Api, error_of

from agentenvs.servers.launch import ServerProcess

KEY = "Idempotency-Key"


def _opened(api: Api) -> float:
    for line in api.call("GET", "/metrics").text.splitlines():
        if line.startswith('agentenvs_sessions_opened_total{env="counter"}'):
            return float(line.split()[-1])
    return 0.0


def _create(api: Api, key: str, body: dict | None = None) -> dict:
    answer = api.call("POST", "/v1/sessions", body or {"env": "counter"}, headers={KEY: key})
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_a_retried_create_answers_the_same_session(api: Api) -> None:
    before = _opened(api)
    first = _create(api, "retry-key-0001")
    again = _create(api, "retry-key-0001")
    assert again == first, "the retry must answer exactly what the first attempt answered"
    assert _opened(api) == before + 1
    other = _create(api, "retry-key-0002")
    assert other["session_id"] != first["session_id"], "another key is another session"
    api.call("DELETE", f"/v1/sessions/{first['session_id']}")
    api.call("DELETE", f"/v1/sessions/{other['session_id']}")


def test_a_retry_while_the_first_attempt_runs_waits_for_its_session(api: Api, server: ServerProcess) -> None:
    """The first attempt's constructor takes a second; the retry arrives meanwhile and gets its answer."""
    body = {"env": "counter", "kwargs": {"slow_start_s": 1.0}}
    answers: list[dict] = []
    first = threading.Thread(target=lambda: answers.append(_create(Api(server.url), "slow-key-0001", body)))
    before = _opened(api)
    first.start()
    retry = _create(api, "slow-key-0001", body)
    first.join(30)
    assert answers == [retry] and _opened(api) == before + 1
    api.call("DELETE", f"/v1/sessions/{retry['session_id']}")


def test_a_key_names_one_body_and_one_open_session(api: Api) -> None:
    first = _create(api, "bound-key-0001")["session_id"]
    other_body = _create(api, "bound-key-0001", {"env": "counter", "kwargs": {"max_turns": 3}})["session_id"]
    assert other_body != first, "the same key with another body is another request"
    api.call("DELETE", f"/v1/sessions/{first}")
    reopened = _create(api, "bound-key-0001")["session_id"]
    assert reopened not in (first, other_body), "a key whose session closed opens a new one, not a dead one"
    for session in (other_body, reopened):
        api.call("DELETE", f"/v1/sessions/{session}")


def test_a_malformed_key_is_refused(api: Api) -> None:
    for bad in ("", "short", "spaces are not allowed", "x" * 129, "caf\u00e9-key-0001".encode().decode("latin-1")):
        answer = api.call("POST", "/v1/sessions", {"env": "counter"}, headers={KEY: bad})
        assert answer.status_code == 400 and error_of(answer)["code"] == "malformed_request", bad


def test_a_failed_attempt_leaves_its_key_free_for_the_retry(api: Api) -> None:
    refused = api.call("POST", "/v1/sessions", {"env": "counter", "kwargs": {"nope": 1}}, headers={KEY: "fail-key-01"})
    assert refused.status_code == 422
    again = api.call("POST", "/v1/sessions", {"env": "counter", "kwargs": {"nope": 1}}, headers={KEY: "fail-key-01"})
    assert again.status_code == 422, "a failed attempt is not stored: its retry runs (and fails) again"


def test_the_inline_and_the_flask_path_honour_keys_too(api: Api) -> None:
    """bandit opens on the event loop (inline); a chunked body goes through flask."""
    inline = _create(api, "inline-key-0001", {"env": "bandit"})
    assert _create(api, "inline-key-0001", {"env": "bandit"}) == inline
    flask = api.call("POST", "/v1/sessions", raw=iter([b'{"env": "counter"}']), headers={KEY: "flask-key-0001"})
    assert flask.status_code == 201, flask.text
    retry = api.call("POST", "/v1/sessions", raw=iter([b'{"env": "counter"}']), headers={KEY: "flask-key-0001"})
    assert retry.json() == flask.json()
    for session in (inline["session_id"], flask.json()["session_id"]):
        api.call("DELETE", f"/v1/sessions/{session}")

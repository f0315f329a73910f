"""The fast episode path: inline environments in the server process; steps, resets and batch steps answered
before flask."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Api, error_of, start

from agentenvs.servers.launch import ServerProcess


@pytest.fixture(scope="module")
def isolated() -> Iterator[ServerProcess]:
    process = start(args=("--isolate",))
    try:
        yield process
    finally:
        process.stop()


def _played(api: Api, session: str, turns: int = 3) -> list[dict]:
    api.reset(session, seed=4)
    answers = []
    for turn in range(turns):
        answer = api.step(session, "pull[1]", turn)
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
    return answers


def test_an_inline_env_lives_in_the_server_process_and_a_worker_env_does_not(api: Api, server: ServerProcess) -> None:
    bandit, counter = api.open("bandit"), api.open("counter")
    inline = api.call("GET", f"/v1/sessions/{bandit}").json()
    assert inline["worker"] is None and inline["worker_pid"] == server.pid
    held = api.call("GET", f"/v1/sessions/{counter}").json()
    assert held["worker"] in (0, 1) and held["worker_pid"] != inline["worker_pid"]


def test_isolate_puts_an_inline_env_in_a_worker_with_the_same_episode(api: Api, isolated: ServerProcess) -> None:
    other = Api(isolated.url)
    session = other.open("bandit")
    assert other.call("GET", f"/v1/sessions/{session}").json()["worker"] in (0, 1)
    assert _played(other, session) == _played(api, api.open("bandit"))


def test_inline_steps_keep_idempotent_turns_and_turn_checks(api: Api) -> None:
    session = api.open("bandit")
    first = _played(api, session, turns=1)[0]
    assert api.step(session, "pull[0]", 0).json() == first, "a retried turn gets the stored answer"
    mismatch = api.step(session, "pull[0]", 5)
    assert mismatch.status_code == 409 and error_of(mismatch)["code"] == "turn_mismatch"


def test_what_the_fast_path_passes_on_gets_flask_answers(api: Api) -> None:
    session = api.open("bandit")
    api.reset(session)
    slash = api.call("POST", f"/v1/sessions/{session}/step/", {"action": "pull[0]", "turn": 0})
    assert slash.status_code == 200 and slash.json()["observation"]
    wrong_method = api.call("PUT", f"/v1/sessions/{session}/step", {"action": "pull[0]", "turn": 1})
    assert wrong_method.status_code == 405 and "POST" in wrong_method.headers["Allow"]
    chunked = api.call("POST", f"/v1/sessions/{session}/step", raw=iter([b'{"action": "pull[0]", ', b'"turn": 1}']))
    assert chunked.status_code == 200, chunked.text


def test_fast_path_steps_are_counted_like_any_request(api: Api) -> None:
    def served() -> float:
        text = api.call("GET", "/metrics").text
        line = 'agentenvs_requests_total{route="POST /v1/sessions/<session_id>/step",status="200"}'
        return sum(float(row.split()[-1]) for row in text.splitlines() if row.startswith(line))

    before = served()
    _played(api, api.open("bandit"), turns=4)
    assert served() == before + 4


def test_a_token_server_checks_the_token_on_the_fast_path() -> None:
    with start(token="step-path-token") as process:
        owner, stranger = Api(process.url, token="step-path-token"), Api(process.url)
        session = owner.open("bandit")
        owner.reset(session)
        refused = stranger.step(session, "pull[0]", 0)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
        assert owner.step(session, "pull[0]", 0).status_code == 200


def _requests_served(api: Api, route: str) -> float:
    line = f'agentenvs_requests_total{{route="{route}",status="200"}}'
    return sum(float(row.split()[-1]) for row in api.call("GET", "/metrics").text.splitlines() if row.startswith(line))


def test_resets_and_batch_steps_are_answered_natively_as_flask_would(api: Api, isolated: ServerProcess) -> None:
    other = Api(isolated.url)  # --isolate: every session in a worker, so these go through the thread path
    for client in (api, other):
        before = _requests_served(client, "POST /v1/sessions/<session_id>/reset")
        session = client.open("bandit")
        empty = client.call("POST", f"/v1/sessions/{session}/reset", raw=b"")
        assert empty.status_code == 200 and empty.json()["observation"], "a reset may have an empty body"
        bad = client.call("POST", f"/v1/sessions/{session}/reset", raw=b"{not json")
        assert bad.status_code == 400 and error_of(bad)["code"] == "malformed_request"
        assert _requests_served(client, "POST /v1/sessions/<session_id>/reset") == before + 1
    inline, held = api.open("bandit"), other.open("bandit")
    for client, session in ((api, inline), (other, held)):
        client.reset(session, seed=4)
        batch = client.call(
            "POST",
            "/v1/batch/step",
            {
                "steps": [
                    {"session_id": session, "action": "pull[1]", "turn": 0},
                    {"session_id": "nope", "action": "pull[1]", "turn": 0},
                ]
            },
        )
        assert batch.status_code == 200, batch.text
        good, unknown = batch.json()["results"]
        assert unknown["error"]["code"] == "unknown_session" and good["observation"]
    assert api.call("POST", f"/v1/sessions/{inline}/step", {"action": "pull[1]", "turn": 1}).status_code == 200
    malformed = api.call("POST", "/v1/batch/step", {"steps": "all"})
    assert malformed.status_code == 400 and error_of(malformed)["code"] == "malformed_request"


def test_sessions_are_opened_natively_as_flask_would(api: Api, isolated: ServerProcess) -> None:
    """Inline envs open on the event loop, worker envs (and every env under --isolate) on a thread."""
    line = 'agentenvs_requests_total{route="POST /v1/sessions",status="201"}'

    def opened(client: Api) -> float:
        return sum(float(r.split()[-1]) for r in client.call("GET", "/metrics").text.splitlines() if r.startswith(line))

    other = Api(isolated.url)
    for client, env in ((api, "bandit"), (api, "counter"), (other, "bandit")):
        before = opened(client)
        answer = client.call("POST", "/v1/sessions", {"env": env})
        assert answer.status_code == 201 and answer.json()["env"]["name"] == env, answer.text
        assert client.call("GET", f"/v1/sessions/{answer.json()['session_id']}").json()["env"] == env
        assert opened(client) == before + 1
        client.call("DELETE", f"/v1/sessions/{answer.json()['session_id']}")
    unknown = api.call("POST", "/v1/sessions", {"env": "no-such-env"})
    assert unknown.status_code == 422 and error_of(unknown)["code"] == "unknown_env"
    for body in ({"env": ["bandit"]}, {"env": "bandit", "extra": 1}):
        bad = api.call("POST", "/v1/sessions", body)
        assert bad.status_code == 400 and error_of(bad)["code"] == "malformed_request", bad.text
    empty = api.call("POST", "/v1/sessions", raw=b"")
    assert empty.status_code == 400 and error_of(empty)["code"] == "malformed_request"


def test_sessions_are_closed_natively_as_flask_would(api: Api, isolated: ServerProcess) -> None:
    """A DELETE answers 204 with no body on either path, for any id, whatever body came with it."""
    line = 'agentenvs_requests_total{route="DELETE /v1/sessions/<session_id>",status="204"}'

    def closed(client: Api) -> float:
        return sum(float(r.split()[-1]) for r in client.call("GET", "/metrics").text.splitlines() if r.startswith(line))

    other = Api(isolated.url)
    for client in (api, other):
        before = closed(client)
        session = client.open("bandit")
        answer = client.call("DELETE", f"/v1/sessions/{session}")
        assert answer.status_code == 204 and answer.content == b"" and "content-length" not in answer.headers
        gone = client.call("GET", f"/v1/sessions/{session}")
        assert gone.status_code == 404 and error_of(gone)["code"] == "unknown_session"
        assert client.call("DELETE", f"/v1/sessions/{session}").status_code == 204, "closing twice is no error"
        assert client.call("DELETE", "/v1/sessions/never-opened", raw=b"{not json").status_code == 204
        assert closed(client) == before + 3
    with start(token="close-path-token") as process:
        owner, stranger = Api(process.url, token="close-path-token"), Api(process.url)
        session = owner.open("bandit")
        refused = stranger.call("DELETE", f"/v1/sessions/{session}")
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
        assert owner.call("GET", f"/v1/sessions/{session}").status_code == 200, "a refused close closes nothing"

"""Real servers on 127.0.0.1 for the server tests, started once per module and always stopped."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remote_envs_for_tests import PYTHONPATH, SERVE_ARG

from agentenvs.servers.launch import ServerProcess, launch_server


def start(*, workers: int = 2, token: str | None = None, args: tuple[str, ...] = ()) -> ServerProcess:
    return launch_server(["bandit", SERVE_ARG], workers=workers, token=token, extra_args=args, env_vars=PYTHONPATH)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """Two workers, a 1.5 s step limit, room for 32 sessions."""
    process = start(args=("--step-timeout", "1.5", "--max-sessions", "32"))
    try:
        yield process
    finally:
        process.stop()


class Api:
    """Raw HTTP calls to one server (the tests check wire answers, so no client library in between)."""

    def __init__(self, url: str, token: str | None = None):
        self.url = url
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None, **kw: Any) -> requests.Response:
        if raw is not None:
            return self.http.request(method, self.url + path, data=raw, timeout=30, **kw)
        return self.http.request(method, self.url + path, json=body, timeout=30, **kw)

    def open(self, env: str = "counter", **body: Any) -> str:
        answer = self.call("POST", "/v1/sessions", {"env": env, **body})
        assert answer.status_code == 201, answer.text
        return answer.json()["session_id"]

    def reset(self, session_id: str, seed: int = 0) -> dict:
        answer = self.call("POST", f"/v1/sessions/{session_id}/reset", {"seed": seed})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def step(self, session_id: str, action: str, turn: int) -> requests.Response:
        return self.call("POST", f"/v1/sessions/{session_id}/step", {"action": action, "turn": turn})

    def healthy(self) -> bool:
        return self.call("GET", "/healthz").status_code == 200


def error_of(answer: requests.Response) -> dict:
    """The ``error`` object of a JSON error answer (asserting it is one)."""
    assert answer.headers["Content-Type"].startswith("application/json"), answer.headers
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"], body
    return body["error"]


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Api:
    return Api(server.url)

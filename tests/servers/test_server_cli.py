"""``agentenvs serve`` from the command line, its transport errors and limits, and the WSGI entry point."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

CLI = [sys.executable, "-m", "agentenvs.cli", "serve"]


def test_help_names_every_flag() -> None:
    answer = subprocess.run([*CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0
    for flag in ("--env", "--workers", "--max-sessions", "--lease-ttl", "--step-timeout", "--token", "--port"):
        assert flag in answer.stdout


def test_an_unknown_env_is_a_clear_error_and_leaves_nothing_running() -> None:
    answer = subprocess.run([*CLI, "--env", "no-such-env", "--port", "0"], capture_output=True, text=True, timeout=120)
    assert answer.returncode == 2
    assert "no-such-env" in answer.stdout and "agentenvs list" in answer.stdout


def test_a_bad_env_spec_is_refused_by_the_parser() -> None:
    answer = subprocess.run([*CLI, "--env", "x=not-an-entry-point"], capture_output=True, text=True, timeout=60)
    assert answer.returncode == 2 and "NAME=package.module:Class" in answer.stderr


def test_the_wsgi_entry_point_runs_under_waitress() -> None:
    waitress = shutil.which("waitress-serve", path=str(Path(sys.executable).parent))
    assert waitress, "waitress is part of the server set-up"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "AGENTENVS_SERVE": json.dumps({"envs": {"bandit": None}, "workers": 1})}
    command = [waitress, "--host", "127.0.0.1", "--port", str(port), "--threads", "4"]
    process = subprocess.Popen([*command, "--call", "agentenvs.servers.wsgi:app_from_environment"], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        session = requests.post(url + "/v1/sessions", json={"env": "bandit"}, timeout=30).json()["session_id"]
        requests.post(f"{url}/v1/sessions/{session}/reset", json={"seed": 0}, timeout=30)
        step = requests.post(f"{url}/v1/sessions/{session}/step", json={"action": "pull[0]", "turn": 0}, timeout=30)
        assert step.status_code == 200 and step.json()["info"]["turn"] == 1
    finally:
        process.terminate()
        process.wait(30)


def _raw_answer(raw: socket.socket) -> tuple[str, dict]:
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = raw.recv(65536)
        if not chunk:
            break
        answer += chunk
    head, _, body = answer.decode().partition("\r\n\r\n")
    return head, json.loads(body)


def test_transport_errors_are_json_and_the_server_keeps_serving() -> None:
    from conftest import start

    server = start(workers=1, args=("--connection-limit", "3"))
    try:
        host, port = server.url.rsplit("//", 1)[1].rsplit(":", 1)
        cases = {
            "400": b"NOT A REQUEST LINE\r\n\r\n",
            "414": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            "431": b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"b" * 40000 + b"\r\n\r\n",
        }
        for status, request in cases.items():
            with socket.create_connection((host, int(port)), timeout=30) as raw:
                raw.sendall(request)
                head, body = _raw_answer(raw)
            assert head.startswith(f"HTTP/1.1 {status}") and "application/json" in head, head
            assert body["error"]["code"] == "malformed_request", body
        held = [socket.create_connection((host, int(port)), timeout=30) for _ in range(3)]
        try:
            with socket.create_connection((host, int(port)), timeout=30) as extra:
                head, body = _raw_answer(extra)
            assert head.startswith("HTTP/1.1 503") and body["error"]["code"] == "at_capacity", head
        finally:
            for connection in held:
                connection.close()
        time.sleep(0.2)
        assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
    finally:
        server.stop()

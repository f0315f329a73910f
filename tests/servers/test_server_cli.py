"""``agentenvs serve`` from the command line, and the gunicorn WSGI entry point on a real socket."""

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


def test_the_app_runs_under_gunicorn_with_one_worker() -> None:
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent))
    assert gunicorn, "gunicorn is part of the dev set-up"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "AGENTENVS_SERVE": json.dumps({"envs": {"bandit": None}, "workers": 1})}
    command = [gunicorn, "-w", "1", "-k", "gthread", "--threads", "4", "-b", f"127.0.0.1:{port}", "--no-control-socket"]
    process = subprocess.Popen([*command, "agentenvs.servers.wsgi:app_from_environment()"], env=env)
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

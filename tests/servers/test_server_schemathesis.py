"""The served OpenAPI document tells the truth: ``schemathesis run URL/v1/openapi.json --checks all`` passes.

A real server on 127.0.0.1, with and without a token, tested by the schemathesis CLI as a new user would
run it (no configuration file), stateful phase included: its links create a session and follow it
through reset and step.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requests

from agentenvs.servers.launch import launch_server

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


@pytest.mark.parametrize("token", [None, "schemathesis-token"])
def test_schemathesis_finds_no_failure(tmp_path: Path, token: str | None) -> None:
    assert SCHEMATHESIS.exists(), f"{SCHEMATHESIS} is part of the dev set-up (pip install -e '.[dev]')"
    server = launch_server(["bandit"], workers=1, token=token)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        document = requests.get(server.url + "/v1/openapi.json", headers=headers, timeout=30).json()
        assert ("security" in document) == (token is not None)
        command = [str(SCHEMATHESIS), "run", server.url + "/v1/openapi.json", "--checks", "all"]
        command += ["--max-examples", "30", "--seed", "7", "--workers", "1"]
        if token:
            command += ["--header", f"Authorization: Bearer {token}"]
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=420)
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert "Stateful" in run.stdout and "links" in run.stdout.lower(), run.stdout[-3000:]
    finally:
        server.stop()

"""Start an ``agentenvs serve`` subprocess on a free loopback port and wait until ``/healthz`` answers.

Tests, benchmarks and the demo use it::

    with launch_server(["bandit"], workers=2) as server:
        env = agentenvs.connect(server.url).make("bandit")
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.errors import EnvFailed


class ServerProcess:
    """A running server subprocess: its ``url``, ``pid``, log, and :meth:`stop` (SIGTERM, then SIGKILL)."""

    def __init__(self, process: subprocess.Popen, url: str, workdir: tempfile.TemporaryDirectory, log_path: Path):
        self.process = process
        self.url = url
        self._workdir = workdir
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """Stop gracefully (SIGTERM, which drains) and return the exit code; kill if it does not stop."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._workdir.cleanup()
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def launch_server(
    envs: Sequence[str] = ("bandit",),
    *,
    workers: int = 2,
    token: str | None = None,
    extra_args: Sequence[str] = (),
    env_vars: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> ServerProcess:
    """Start ``agentenvs serve --env ... --port 0`` on 127.0.0.1 and return once it is healthy.

    ``envs`` items are ``NAME`` or ``NAME=module:Class``; ``extra_args`` go to the command line as they are.
    """
    command = ["serve", "--workers", str(workers)]
    for env in envs:
        command += ["--env", env]
    if token is not None:
        command += ["--token", token]
    return launch([*command, *extra_args], env_vars=env_vars, timeout=timeout)


def launch_retriever(index_dir: str | Path, *, extra_args: Sequence[str] = (), timeout: float = 120.0) -> ServerProcess:
    """Start ``agentenvs serve-retriever --index DIR --port 0`` on 127.0.0.1 and return once it is healthy."""
    return launch(["serve-retriever", "--index", str(index_dir), *extra_args], timeout=timeout)


def launch(arguments: Sequence[str], *, env_vars: dict[str, str] | None = None, timeout: float = 60.0) -> ServerProcess:
    """Start ``agentenvs ARGUMENTS --host 127.0.0.1 --port 0 --port-file F`` and wait for ``/healthz``.

    Its port file and log live in a scratch folder under ``$XDG_CACHE_HOME/agentenvs/serve/``, removed by
    :meth:`ServerProcess.stop`.
    """
    scratch = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentenvs" / "serve"
    scratch.mkdir(parents=True, exist_ok=True)
    workdir = tempfile.TemporaryDirectory(prefix="run-", dir=scratch)
    port_file = Path(workdir.name) / "port.json"
    log_path = Path(workdir.name) / "server.log"
    command = [sys.executable, "-m", "agentenvs.cli", *arguments, "--host", "127.0.0.1", "--port", "0"]
    command += ["--port-file", str(port_file)]
    environment = {**os.environ, **(env_vars or {})}
    environment.pop("AGENTENVS_TOKEN", None)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    server = ServerProcess(process, "", workdir, log_path)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EnvFailed(f"the server exited with code {process.returncode}:\n{server.log()}")
            if port_file.exists():
                server.url = json.loads(port_file.read_text())["url"]
                if _healthy(server.url):
                    return server
            time.sleep(0.05)
        raise EnvFailed(f"the server was not healthy within {timeout:g} s:\n{server.log()}")
    except BaseException:
        server.stop()
        raise


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False

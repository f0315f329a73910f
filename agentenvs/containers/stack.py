"""Run ``deploy/compose.yaml`` as one project: up, wait healthy, play, down, and check nothing is left.

The container tests and ``bench/bench_containers.py`` use this: every service on a free loopback port,
one expert episode per environment through ``agentenvs.connect`` (the same client a trainer uses), the
time from ``up`` to each server's first healthy ``/healthz`` (the cold start), and after ``down`` the
project's containers, networks and volumes, which must all be gone.
"""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.containers import COMPOSE, ENVIRONMENTS, TARGETS
from agentenvs.containers.images import detect_engine, engine_env

PROJECT_LABEL = {"podman": "io.podman.compose.project", "docker": "com.docker.compose.project"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def compose_command(engine: str) -> list[str]:
    """podman-compose (pip, next to this interpreter, else on PATH) for podman; ``docker compose`` for docker."""
    if engine == "docker":
        return ["docker", "compose"]
    local = Path(sys.executable).parent / "podman-compose"
    found = str(local) if local.exists() else shutil.which("podman-compose")
    if not found:
        raise RuntimeError("podman-compose is missing: pip install podman-compose==1.6.0 (make test-containers)")
    return [found]


@dataclass
class Stack:
    """One compose project of every service, on free loopback ports, with a fresh token."""

    project: str = field(default_factory=lambda: f"agentenvs-{secrets.token_hex(3)}")
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    services: tuple[str, ...] = TARGETS
    engine: str = field(default_factory=detect_engine)
    ports: dict[str, int] = field(default_factory=dict)
    up_s: float = 0.0

    def __post_init__(self) -> None:
        self.ports = self.ports or {name: free_port() for name in self.services}

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    def env(self) -> dict[str, str]:
        env = engine_env(self.engine)
        env["AGENTENVS_TOKEN"] = self.token
        env.update({f"AGENTENVS_{name.upper()}_PORT": str(port) for name, port in self.ports.items()})
        return env

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        command = [*compose_command(self.engine), "-p", self.project, "-f", str(COMPOSE), *args]
        done = subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        return done

    def up(self) -> float:
        """Start the services (detached); returns the perf_counter time ``up`` began (cold starts count from it)."""
        started = time.perf_counter()
        self.compose("up", "-d", *self.services)
        self.up_s = time.perf_counter() - started
        return started

    def down(self) -> None:
        self.compose("down", "-v", "-t", "20")

    def wait_healthy(self, since: float, timeout: float = 300) -> dict[str, float]:
        """Seconds from ``since`` until each service's /healthz answered 200; a crashed container fails at once."""
        pending, healthy = list(self.services), {}
        while pending:
            for name in list(pending):
                if answers_healthy(self.url(name)):
                    healthy[name] = time.perf_counter() - since
                    pending.remove(name)
                elif self.crashed(name):
                    raise RuntimeError(f"{name} crashed before it was healthy:\n{self.logs(name)}")
            if pending and time.perf_counter() - since > timeout:
                raise TimeoutError(f"not healthy within {timeout:.0f} s: {pending}\n{self.logs(pending[0])}")
            time.sleep(0.1 if pending else 0)
        return healthy

    def crashed(self, service: str) -> bool:
        """The service's container exited or was restarted by its policy."""
        state = self._engine("inspect", "--format", "{{.RestartCount}} {{.State.Status}}", self.container(service))
        restarts, status = state.split()[:2]
        return int(restarts) > 0 or status in ("exited", "dead")

    def logs(self, service: str, lines: int = 40) -> str:
        done = subprocess.run(
            [self.engine, "logs", "--tail", str(lines), self.container(service)],
            env=self.env(), capture_output=True, text=True,
        )  # fmt: skip
        return "\n".join(line for line in (done.stdout + done.stderr).splitlines() if "systemd" not in line)

    def health_status(self) -> dict[str, str]:
        """The engine's own health check verdict per service (``podman healthcheck run``)."""
        if self.engine != "podman":
            return {}
        verdicts = {}
        for name in self.services:
            container = self.container(name)
            done = subprocess.run(["podman", "healthcheck", "run", container], env=self.env(), capture_output=True)
            verdicts[name] = "healthy" if done.returncode == 0 else f"unhealthy ({done.returncode})"
        return verdicts

    def container(self, service: str) -> str:
        label = PROJECT_LABEL[self.engine]
        done = self._engine(
            "ps", "-a", "--filter", f"label={label}={self.project}", "--filter", f"label={label.rsplit('.', 1)[0]}"
            f".service={service}", "--format", "{{.Names}}",
        )  # fmt: skip
        return done.split()[0] if done.split() else f"{self.project}_{service}_1"

    def _engine(self, *args: str) -> str:
        done = subprocess.run([self.engine, *args], env=self.env(), capture_output=True, text=True, check=True)
        return done.stdout

    def leftovers(self) -> dict[str, list[str]]:
        """The project's containers, networks and volumes that still exist (all empty after ``down``)."""
        label = f"label={PROJECT_LABEL[self.engine]}={self.project}"
        found = {
            "containers": self._engine("ps", "-a", "--filter", label, "--format", "{{.Names}}").split(),
            "networks": self._engine("network", "ls", "--format", "{{.Name}}").split(),
            "volumes": self._engine("volume", "ls", "--filter", label, "--format", "{{.Name}}").split(),
        }
        found["networks"] = [n for n in found["networks"] if n.startswith(f"{self.project}_")]
        return found


def answers_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def expert_action(privileged: dict[str, Any] | None, info: dict[str, Any], plan: list[str]) -> str:
    """The next action of the environment's published plan (the keys ExpertPolicy follows)."""
    if privileged is None and plan:
        return plan.pop(0)
    privileged = privileged or {}
    if isinstance(privileged.get("expert_action"), str):
        return privileged["expert_action"]
    if isinstance(privileged.get("expert_plan"), list):
        plan[:] = [str(a) for a in privileged["expert_plan"]]
    if plan:
        return plan.pop(0)
    if isinstance(privileged.get("best_arm"), int) and info.get("admissible_actions"):
        return str(info["admissible_actions"][privileged["best_arm"]])
    raise RuntimeError(f"no expert plan in info['privileged'] ({sorted(privileged)})")


def play_episode(url: str, token: str, env: str, seed: int = 0, max_steps: int = 300) -> dict[str, Any]:
    """One expert episode of ``env`` on the server at ``url``: its steps, return, success and seconds."""
    import agentenvs

    started = time.perf_counter()
    client = agentenvs.connect(url, token)
    try:
        remote = client.make(env, privileged=True)
        _, info = remote.reset(seed=seed)
        plan: list[str] = []
        steps, total, done = 0, 0.0, False
        while not done and steps < max_steps:
            _, reward, terminated, truncated, info = remote.step(expert_action(info.get("privileged"), info, plan))
            steps, total, done = steps + 1, total + float(reward), terminated or truncated
        remote.close()
    finally:
        client.close()
    seconds = time.perf_counter() - started
    return {"steps": steps, "return": total, "success": bool(info.get("success")), "done": done, "seconds": seconds}


def play_all(stack: Stack, envs: tuple[str, ...] = ENVIRONMENTS) -> dict[str, dict[str, Any]]:
    """One expert episode per environment, all at once (each on its own server)."""
    with ThreadPoolExecutor(len(envs)) as pool:
        futures = {env: pool.submit(play_episode, stack.url(env), stack.token, env) for env in envs}
        return {env: future.result() for env, future in futures.items()}


if __name__ == "__main__":
    stack = Stack()
    since = stack.up()
    try:
        print(json.dumps({"cold_start_s": stack.wait_healthy(since), "episodes": play_all(stack)}, indent=2))
    finally:
        stack.down()
        print(json.dumps({"left_behind": stack.leftovers()}))

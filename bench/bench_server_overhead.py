"""What serving adds to one bandit step: remote (RemoteEnv over loopback HTTP) vs in-process, side by side.

The in-process env, ``agentenvs serve`` (uvicorn with ``servers/front.py``) and, for the WSGI choice, the same
app under waitress (``waitress-serve``, one process, 32 threads) are stepped in turns within one run, so
machine load hits all alike. Also
timed: a bare ``GET /healthz`` (the HTTP floor of each front) and a step through raw ``requests`` (the
client library's share).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

import agentenvs
from agentenvs.servers.launch import launch_server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_waitress() -> tuple[subprocess.Popen, str] | None:
    """The same app and worker pool under waitress (one process, 32 threads), for the WSGI comparison."""
    waitress = shutil.which("waitress-serve", path=str(Path(sys.executable).parent))
    if waitress is None:
        return None
    port = free_port()
    env = {**os.environ, "AGENTENVS_SERVE": json.dumps({"envs": {"bandit": None}, "workers": 2})}
    command = [waitress, "--host", "127.0.0.1", "--port", str(port), "--threads", "32", "--asyncore-use-poll"]
    command += ["--connection-limit", "4096", "--channel-timeout", "120", "--backlog", "4096"]
    process = subprocess.Popen([*command, "--call", "agentenvs.servers.wsgi:app_from_environment"], env=env)
    url = f"http://127.0.0.1:{port}"
    client = agentenvs.connect(url, retries=0)
    for _ in range(600):
        try:
            client.health()
            return process, url
        except (agentenvs.errors.AgentEnvsError, OSError):
            time.sleep(0.1)
    process.kill()
    return None


class Stepper:
    """Steps one env in an endless sequence of episodes, timing each step."""

    def __init__(self, env, name: str):
        self.env, self.name, self.times, self.seed = env, name, [], 0
        env.reset(seed=0)

    def step(self) -> None:
        started = time.perf_counter()
        _, _, terminated, truncated, _ = self.env.step("pull[1]")
        self.times.append(time.perf_counter() - started)
        if terminated or truncated:
            self.seed += 1
            self.env.reset(seed=self.seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per contender")
    parser.add_argument("--no-waitress", action="store_true", help="skip the waitress contender")
    args = parser.parse_args()
    load_before = os.getloadavg()
    server = launch_server(["bandit"], workers=2)
    waitress = None if args.no_waitress else start_waitress()
    try:
        client = agentenvs.connect(server.url)
        steppers = [Stepper(agentenvs.make("bandit"), "in_process"), Stepper(client.make("bandit"), "agentenvs_serve")]
        floors = {"agentenvs_serve": (server.url, [])}
        if waitress is not None:
            other = agentenvs.connect(waitress[1])
            steppers.append(Stepper(other.make("bandit"), "waitress"))
            floors["waitress"] = (waitress[1], [])
        raw = requests.Session()  # the floor: a bare requests call, nothing of ours around it
        raw_session = client.make("bandit")
        raw_session.reset(seed=0)
        raw_times, raw_turn = [], 0
        for _ in range(200):
            for stepper in steppers:
                stepper.step()
        for stepper in steppers:
            stepper.times.clear()
        for _ in range(args.steps):
            for stepper in steppers:
                stepper.step()
            for url, times in floors.values():
                started = time.perf_counter()
                raw.get(url + "/healthz")
                times.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = raw.post(
                f"{server.url}{raw_session.path}/step", json={"action": "pull[1]", "turn": raw_turn}
            ).json()
            raw_times.append(time.perf_counter() - started)
            raw_turn += 1
            if answer["truncated"] or answer["terminated"]:
                raw.post(f"{server.url}{raw_session.path}/reset", json={"seed": raw_turn})
                raw_turn = 0
        stats = {s.name: summarize(s.times) for s in steppers}
        local = stats["in_process"]["median_ms"]
        result = {
            "command": "python bench/bench_server_overhead.py --steps " + str(args.steps),
            "steps_per_contender": args.steps,
            "step": stats,
            "added_median_ms": {name: s["median_ms"] - local for name, s in stats.items() if name != "in_process"},
            "added_p99_ms": {
                name: s["p99_ms"] - stats["in_process"]["p99_ms"] for name, s in stats.items() if name != "in_process"
            },
            "healthz": {name: summarize(times) for name, (_, times) in floors.items()},
            "raw_requests_step_agentenvs_serve": summarize(raw_times),
            "target": "added median < 2 ms per step (agentenvs serve: uvicorn, servers/front.py)",
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        }
        write_result("server_overhead", result)
    finally:
        server.stop()
        if waitress is not None:
            waitress[0].terminate()
            waitress[0].wait(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

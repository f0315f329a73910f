"""Container images and the compose stack: image sizes, cold start to healthy, one expert episode per environment.

Builds every target of deploy/Dockerfile (cached layers are reused; ``--no-build`` only measures what is
there), brings the whole deploy/compose.yaml up on free loopback ports, records the seconds from
``compose up`` to each server's first healthy /healthz, plays one expert episode of each environment
through ``agentenvs.connect``, takes the stack down and records what was left behind (must be nothing).
Needs podman (``make .venv/.containers-installed``) or docker; without one it says so and writes nothing.
"""

from __future__ import annotations

import argparse
import shutil
import time

from common import write_result  # bench/common.py: scripts run as `python bench/<script>.py`

from agentenvs import __version__
from agentenvs.containers import TARGETS
from agentenvs.containers.images import build_all, detect_engine, image_name, image_size
from agentenvs.containers.stack import Stack, play_all


def sizes(engine: str, build: bool) -> tuple[dict, dict]:
    """(image sizes in MB, build report); builds first unless told not to."""
    report = build_all(TARGETS) if build else {"engine": engine, "images": {}}
    megabytes = {target: round(image_size(engine, image_name(target, __version__)) / 1e6, 1) for target in TARGETS}
    return megabytes, report


def run_stack() -> dict:
    """One cold start of the whole stack, an episode per environment, down, leftovers."""
    stack = Stack()
    try:
        cold = stack.wait_healthy(stack.up())
        health = stack.health_status()
        episodes = play_all(stack)
    finally:
        started = time.perf_counter()
        stack.down()
        down_s = time.perf_counter() - started
    return {
        "compose_up_s": round(stack.up_s, 2),
        "cold_start_s": {name: round(seconds, 2) for name, seconds in cold.items()},
        "cold_start_all_s": round(max(cold.values()), 2),
        "engine_healthcheck": health,
        "episodes": {
            env: {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for env, r in episodes.items()
        },
        "compose_down_s": round(down_s, 2),
        "left_behind": stack.leftovers(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="measure the images already built")
    args = parser.parse_args()
    if not (shutil.which("podman") or shutil.which("docker")):
        print("skipped: no podman or docker (make .venv/.containers-installed)")
        return 0
    engine = detect_engine()
    megabytes, report = sizes(engine, build=not args.no_build)
    result = {"engine": engine, "image_mb": megabytes, "base": report.get("base"), "stack": run_stack()}
    result["build_s"] = {target: entry["build_s"] for target, entry in report["images"].items()}
    result["build_note"] = "this run's builds, cached layers reused; first builds are in docs/containers.md"
    write_result("containers", result)
    left = result["stack"]["left_behind"]
    failed = [env for env, episode in result["stack"]["episodes"].items() if not episode["success"]]
    return 1 if failed or any(left.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())

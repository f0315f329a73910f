"""ScienceWorld latency and memory: ``python bench/bench_sciworld.py`` writes ``bench/results/sciworld.json``.

Measured side by side in one run, on the same gold paths:

- ``reset`` (a fresh world of a task) and ``step`` of the environment without valid actions;
- the raw engine step alone, the environment with ``admissible_actions=True`` (cached per state),
  and the package's own ``ScienceWorldEnv.step`` (which always computes the valid actions);
- the deterministic JVM (constant identity hash) against the JVM's default hashing;
- JVM and Python resident memory;
- ``--sessions`` (8) concurrent sessions on one HTTP server (``agentenvs serve``) with two workers.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

import agentenvs
from agentenvs import panels
from agentenvs.envs.sciworld.engine import load_world
from agentenvs.envs.sciworld.jvm import is_sciworld_jvm, java_options
from bench.common import Episode, play_concurrently, summarize, timed, write_result

TASKS = ("find-animal", "chemistry-mix", "test-conductivity", "power-component")


def bench_tasks(per_type: int) -> list[dict[str, Any]]:
    test = panels.load_panel("sciworld", "test")
    return [t for name in TASKS for t in [t for t in test if t["task_name"] == name][:per_type]]


def env_timings(tasks: list[dict[str, Any]], rounds: int, **kwargs: Any) -> dict[str, Any]:
    """Reset and step times of the environment over the gold paths, plus its peak JVM memory."""
    env = agentenvs.make("sciworld", **kwargs)
    resets, steps, engine_steps, rss = [], [], [], []
    try:
        env.reset(seed=0, options={"task_id": tasks[0]["task_id"]})
        for _ in range(rounds):
            for task in tasks:
                _, took = timed(lambda t=task: env.reset(seed=0, options={"task_id": t["task_id"]}))
                resets.append(took)
                for action in task["gold"]:
                    (_, _, terminated, truncated, _), took = timed(env.step, action)
                    steps.append(took)
                    if terminated or truncated:
                        break
                rss.append(env.memory_mb()["jvm_rss_mb"])
                load_world(env.jvm, task["task_name"], task["variation"], "")
                for action in task["gold"]:
                    _, took = timed(env.jvm.call, "step", action)
                    engine_steps.append(took)
        memory = env.memory_mb()
    finally:
        env.close()
    return {
        "reset": summarize(resets),
        "step": summarize(steps),
        "engine_step": summarize(engine_steps),
        "jvm_rss_mb_max": max(rss),
        "python_rss_mb": memory["python_rss_mb"],
    }


def wrapper_timings(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The package's own step (valid actions computed every step), on the same JVM flags."""
    import scienceworld.scienceworld as wrapper_module

    original = wrapper_module.launch_gateway
    wrapper_module.launch_gateway = functools.partial(original, javaopts=java_options())
    try:
        wrapper = wrapper_module.ScienceWorldEnv("", envStepLimit=10_000)
    finally:
        wrapper_module.launch_gateway = original
    steps = []
    try:
        for task in tasks:
            wrapper.load(task["task_name"], task["variation"], "")
            wrapper.reset()
            for action in task["gold"]:
                _, took = timed(wrapper.step, action)
                steps.append(took)
    finally:
        wrapper.close()
    return {"step": summarize(steps)}


def server_sessions(tasks: list[dict[str, Any]], sessions: int, episodes: int) -> dict[str, Any]:
    """``sessions`` threads, each with its own remote session, playing gold paths at once on one server."""
    from agentenvs.servers.launch import launch_server

    peak = {"jvm_rss_mb_total": 0.0, "jvms": 0}

    def pick(index: int, episode: int) -> Episode:
        task = tasks[(index + episode) % len(tasks)]
        return {"task_id": task["task_id"]}, task["task_id"], task["gold"]

    def watch(server_pid: int, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            try:
                jvms = [p for p in psutil.Process(server_pid).children(recursive=True) if is_sciworld_jvm(p.cmdline())]
                total = sum(p.memory_info().rss for p in jvms) / 2**20
            except psutil.Error:
                continue
            peak["jvm_rss_mb_total"] = max(peak["jvm_rss_mb_total"], total)
            peak["jvms"] = max(peak["jvms"], len(jvms))

    with launch_server(["sciworld"], workers=2, extra_args=("--setup-timeout", "300", "--step-timeout", "120")) as srv:
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(srv.pid, stop), daemon=True)
        watcher.start()
        played = play_concurrently(srv.url, "sciworld", sessions, episodes, pick)
        stop.set()
        watcher.join()
    return {"workers": 2, **played, **peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-type", type=int, default=1, help="test-panel tasks per task type (default 1)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the tasks (default 2)")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent server sessions (default 8; 0 skips)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per server session (default 2)")
    args = parser.parse_args()
    tasks = bench_tasks(args.per_type)
    result: dict[str, Any] = {
        "tasks": [t["task_id"] for t in tasks],
    }
    result["env"] = env_timings(tasks, args.rounds)
    result["env_default_hash"] = env_timings(tasks, args.rounds, deterministic=False)
    result["env_admissible"] = env_timings(tasks, 1, admissible_actions=True)
    result["package_wrapper"] = wrapper_timings(tasks)
    result["ratios"] = {
        "wrapper_step_over_env_step": result["package_wrapper"]["step"]["median_ms"]
        / result["env"]["step"]["median_ms"],
        "admissible_step_over_env_step": result["env_admissible"]["step"]["median_ms"]
        / result["env"]["step"]["median_ms"],
        "deterministic_step_over_default": result["env"]["step"]["median_ms"]
        / result["env_default_hash"]["step"]["median_ms"],
    }
    result["targets"] = {
        "step_median_under_20ms": result["env"]["step"]["median_ms"] < 20,
        "reset_median_under_20ms": result["env"]["reset"]["median_ms"] < 20,
        "jvm_rss_at_most_450mb": result["env"]["jvm_rss_mb_max"] <= 450,
    }
    if args.sessions:
        result["server"] = server_sessions(tasks, args.sessions, args.episodes)
    result["loadavg_at_end"] = list(psutil.getloadavg())
    write_result("sciworld", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

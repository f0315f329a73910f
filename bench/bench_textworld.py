"""TextWorld costs: game generation per family, reset and step latency against TextWorld's own env on
the same game, memory per environment, and the replanning expert on every panel game.
Writes ``bench/results/textworld.json``.

Run as ``python bench/bench_textworld.py [--repeats 40] [--skip-expert]``; the first run builds every
panel game into the cache (about 5 s a game on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psutil
from common import summarize, timed, write_result  # bench/common.py

import agentenvs
from agentenvs.envs.textworld.games import FAMILIES, generate, materialise
from agentenvs.panels import load_panel, splits


def generation(seed: int) -> dict:
    """Seconds to generate (and replay) one game per family at levels 1 and 3."""
    times = {}
    for family in FAMILIES:
        for level in (1, 3):
            with tempfile.TemporaryDirectory() as scratch:
                started = time.perf_counter()
                generate(family, level, "train", seed, Path(scratch))
                times[f"{family}-l{level}"] = time.perf_counter() - started
    return times


def latency(task: dict, repeats: int) -> dict:
    """Reset and step of ours and of ``textworld.start`` with the same infos, on one game, interleaved."""
    import textworld

    infos = textworld.EnvInfos(admissible_commands=True, score=True, max_score=True, won=True, lost=True, facts=True)
    path = str(materialise(task))
    raw = textworld.start(path, request_infos=infos)
    ours = agentenvs.make("textworld")
    options = {"split": "test", "task_id": task["task_id"]}
    times: dict[str, list[float]] = {"ours_reset": [], "raw_reset": [], "ours_step": [], "raw_step": []}
    try:
        for _ in range(repeats):
            times["ours_reset"].append(timed(ours.reset, seed=0, options=options)[1])
            times["raw_reset"].append(timed(raw.reset)[1])
            for command in task["walkthrough"][:-1]:
                times["ours_step"].append(timed(ours.step, command)[1])
                times["raw_step"].append(timed(raw.step, command)[1])
    finally:
        ours.close()
        raw.close()
    result = {name: summarize(values) for name, values in times.items()}
    result["step_overhead_ratio"] = result["ours_step"]["median_ms"] / result["raw_step"]["median_ms"]
    return result


def memory(tasks: list[dict]) -> dict:
    """RSS growth per environment holding a loaded game (one per family)."""
    process = psutil.Process(os.getpid())
    before = process.memory_info().rss
    envs = []
    for task in tasks:
        env = agentenvs.make("textworld")
        env.reset(seed=0, options={"split": "test", "task_id": task["task_id"]})
        envs.append(env)
    grown = process.memory_info().rss - before
    for env in envs:
        env.close()
    return {"envs": len(envs), "rss_mb_per_env": grown / len(envs) / 2**20}


def expert_everywhere() -> dict:
    """The replanning expert (TextWorld's planner from the current state) on every game of every split."""
    env = agentenvs.make("textworld", privileged=True)
    results = {}
    try:
        for split in sorted(splits("textworld")):
            won = []
            for task in load_panel("textworld", split):
                _, info = env.reset(seed=0, options={"split": split, "task_id": task["task_id"]})
                done = False
                while not done and info["privileged"]["expert_plan"]:
                    _, _, terminated, truncated, info = env.step(info["privileged"]["expert_plan"][0])
                    done = terminated or truncated
                won.append(bool(info.get("success")) and info["score"] == 1.0)
            results[split] = {"games": len(won), "expert_success": sum(won) / len(won)}
    finally:
        env.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=40, help="resets (each followed by its walkthrough)")
    parser.add_argument("--skip-expert", action="store_true", help="leave out the expert over every panel game")
    args = parser.parse_args()
    test = load_panel("textworld", "test")
    per_family = [next(t for t in test if t["family"] == family and t["level"] == 3) for family in FAMILIES]
    result = {
        "generation_s": generation(seed=12345),
        "latency": {task["task_id"]: latency(task, args.repeats) for task in per_family},
        "memory": memory(per_family),
    }
    if not args.skip_expert:
        result["expert"] = expert_everywhere()
    write_result("textworld", result)


if __name__ == "__main__":
    main()

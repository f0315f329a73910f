"""In-process bandit speed: ``reset`` and ``step`` latency (median, p99), per task size and through gymnasium.

Every episode of the test panel is played with cycling actions; the same loop runs on the plain
environment and on ``gymnasium.make("agentenvs/Bandit-v0")`` (with gymnasium's wrappers), side by
side in one run, so their ratio is the cost of the wrappers.
"""

from __future__ import annotations

import time

import gymnasium
from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

import agentenvs

ROUNDS = 3
"""Passes over the 60 test tasks (each pass plays every task once with a different seed)."""


def play_panel(env, task_ids: list[str], seed: int, resets: list[float], steps: dict[str, list[float]]) -> None:
    for index, task_id in enumerate(task_ids):
        started = time.perf_counter()
        _, info = env.reset(seed=seed + index, options={"task_id": task_id})
        resets.append(time.perf_counter() - started)
        arms = len(info["admissible_actions"])
        kind = info["task_type"].split("-")[1]
        done, turn = False, 0
        while not done:
            action = "not an arm" if turn % 10 == 9 else f"pull[{turn % arms}]"
            started = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            steps.setdefault(kind, []).append(time.perf_counter() - started)
            done, turn = terminated or truncated, turn + 1


def main() -> int:
    plain = agentenvs.make("bandit")
    wrapped = gymnasium.make("agentenvs/Bandit-v0")
    task_ids = [task["task_id"] for task in plain.tasks("test")]
    timings = {name: ([], {}) for name in ("plain", "gymnasium_make")}
    for round_index in range(ROUNDS):
        for name, env in (("plain", plain), ("gymnasium_make", wrapped)):
            play_panel(env, task_ids, 1000 * round_index, *timings[name])
    result: dict = {"rounds": ROUNDS, "episodes_per_variant": ROUNDS * len(task_ids)}
    for name, (resets, steps) in timings.items():
        every_step = [t for values in steps.values() for t in values]
        result[name] = {
            "reset": summarize(resets),
            "step": summarize(every_step),
            "step_by_arms": {kind: summarize(values) for kind, values in sorted(steps.items())},
        }
    result["step_median_ratio_gymnasium_to_plain"] = (
        result["gymnasium_make"]["step"]["median_ms"] / result["plain"]["step"]["median_ms"]
    )
    result["note"] = "one process; every 10th action is invalid"
    write_result("bandit_step", result)
    plain.close()
    wrapped.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

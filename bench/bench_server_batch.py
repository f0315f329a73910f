"""One batch step of 64 bandit sessions vs 64 single steps, side by side in one run.

Contenders per round: ``Client.step_many`` (one ``POST /v1/batch/step``), 64 sequential ``RemoteEnv.step``
calls (a trainer looping over its envs), and 64 single steps from 16 threads at once.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

import agentenvs
from agentenvs.servers.launch import launch_server

SESSIONS = 64


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with launch_server(["bandit"], workers=2) as server:
        client = agentenvs.connect(server.url)
        groups = {name: [client.make("bandit") for _ in range(SESSIONS)] for name in ("batch", "sequential", "threads")}
        for envs in groups.values():
            for index, env in enumerate(envs):
                env.reset(seed=index)
        times: dict[str, list[float]] = {name: [] for name in groups}
        errors = 0
        pool = ThreadPoolExecutor(16)

        def fresh(envs: list) -> None:
            for index, env in enumerate(envs):
                if env.done:
                    env.reset(seed=index + env.turn)

        for _ in range(args.rounds):
            for envs in groups.values():
                fresh(envs)
            started = time.perf_counter()
            results = client.step_many(groups["batch"], ["pull[0]"] * SESSIONS)
            times["batch"].append(time.perf_counter() - started)
            errors += sum(isinstance(r, Exception) for r in results)
            started = time.perf_counter()
            for env in groups["sequential"]:
                env.step("pull[0]")
            times["sequential"].append(time.perf_counter() - started)
            started = time.perf_counter()
            list(pool.map(lambda env: env.step("pull[0]"), groups["threads"]))
            times["threads"].append(time.perf_counter() - started)
        pool.shutdown()
        stats = {name: summarize(values) for name, values in times.items()}
        throughput = {name: SESSIONS / (s["median_ms"] / 1000) for name, s in stats.items()}
        write_result(
            "server_batch",
            {
                "command": f"python bench/bench_server_batch.py --rounds {args.rounds}",
                "sessions_per_round": SESSIONS,
                "round_time": stats,
                "steps_per_s_at_median": throughput,
                "speedup_batch_vs_sequential": throughput["batch"] / throughput["sequential"],
                "speedup_batch_vs_16_threads": throughput["batch"] / throughput["threads"],
                "batch_item_errors": errors,
                "target": "batch >= 5x the throughput of 64 single steps",
                "loadavg_before": load_before,
                "loadavg_after": os.getloadavg(),
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

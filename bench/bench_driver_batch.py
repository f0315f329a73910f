"""How much of a server's batch capacity the rollout driver uses, against the driver's old path, in one run.

The server's capacity: back-to-back ``EnvPool.step_many`` calls over ``--sessions`` bandit sessions (the
route alone, no policy, no records, no resets: the steps over the calls' summed time), measured between
the driver's runs. The driver plays
bandit episodes with a scripted policy through the same server:

- ``threads_single_steps``: the path before this change (a thread per episode, one HTTP call per step
  through requests, 8 episodes at once);
- ``threads_client_batching``: a thread per episode, ``--sessions`` at once, the client batching the
  steps that meet (``Client(batch_steps=True)``);
- ``rounds_random`` and ``rounds_expert``: the driver's rounds, every ready session in one batch call.

A second capacity, ``capacity_two_callers``, has two threads each calling back to back over half the
sessions: the server then never waits for one caller to read its answer, as it does between one caller's
calls. The shares of both are reported.

    .venv/bin/python bench/bench_driver_batch.py [--sessions 64,128 --servers 1 --episodes 1024]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

from agentenvs.client import EnvPool
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.scripted import ExpertPolicy, RandomPolicy
from agentenvs.servers.launch import launch_server


def capacity(urls: list[str], sessions: int, rounds: int) -> dict:
    """Steps/s of back-to-back batch calls over ``sessions`` sessions from one caller: the steps over the
    calls' summed time (sustained, as the driver's runs are measured; resets between calls not counted),
    and at the median."""
    with EnvPool(urls, strategy="round_robin") as pool:
        envs = _ready_sessions(pool, sessions)
        times = []
        for _ in range(rounds):
            _reset_done(envs)
            started = time.perf_counter()
            pool.step_many(envs, ["pull[0]"] * sessions)
            times.append(time.perf_counter() - started)
    stats = summarize(times)
    return {
        "round_time": stats,
        "steps_per_s": sessions * len(times) / sum(times),
        "steps_per_s_at_median_round": sessions / (stats["median_ms"] / 1000),
    }


def capacity_two_callers(urls: list[str], sessions: int, rounds: int) -> dict:
    """Steps/s when two threads each send back-to-back batch calls over half the sessions (as the driver's
    two lanes do), so the server never waits on one caller reading its answer: steps over the wall time."""
    with EnvPool(urls, strategy="round_robin") as pool:
        envs = _ready_sessions(pool, sessions)
        halves = [envs[: sessions // 2], envs[sessions // 2 :]]

        def call_back_to_back(half: list) -> None:
            for _ in range(rounds):
                _reset_done(half)
                pool.step_many(half, ["pull[0]"] * len(half))

        started = time.perf_counter()
        with ThreadPoolExecutor(2) as callers:
            list(callers.map(call_back_to_back, halves))
        wall = time.perf_counter() - started
    return {"steps_per_s": sessions * rounds / wall, "wall_s": wall}


def _ready_sessions(pool: EnvPool, sessions: int) -> list:
    envs = pool.make_many("bandit", sessions)
    for index, env in enumerate(envs):
        env.reset(seed=index)
    return envs


def _reset_done(envs: list) -> None:
    for index, env in enumerate(envs):
        if env.done:
            env.reset(seed=index + env.turn)


def drive(
    urls: list[str], policy, schedule: str, concurrency: int, episodes: int, batch_steps: bool, transport: str = "auto"
) -> dict:
    """One driver run: steps/s over the whole run (opening sessions, resets, records and closing included)."""
    config = RolloutConfig(concurrency=concurrency, progress=False, schedule=schedule)
    with EnvPool(urls, batch_steps=batch_steps, transport=transport) as pool:
        started = time.perf_counter()
        records = run_rollouts("bandit", policy, n=episodes, config=config, servers=pool)
        wall = time.perf_counter() - started
        batcher = [c.batcher.stats() for c in pool.clients if c.batcher is not None]
    steps = sum(r.num_turns for r in records)
    return {
        "schedule": schedule,
        "policy": policy.name,
        "concurrency": concurrency,
        "client_batching": batch_steps,
        "transport": transport,
        "episodes": len(records),
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "failure_causes": sorted({r.failure_cause for r in records}),
        "client_batcher": batcher,
    }


def measure(urls: list[str], s: int, e: int, repeats: int, rounds: int) -> dict:
    """Every contender ``repeats`` times, interleaved with the capacity, at ``s`` sessions in play."""
    contenders = {
        "threads_single_steps": lambda: drive(urls, RandomPolicy(), "threads", 8, max(16, e // 8), False, "requests"),
        "threads_client_batching": lambda: drive(urls, RandomPolicy(), "threads", s, e // 2, True),
        "rounds_random": lambda: drive(urls, RandomPolicy(), "rounds", s, e, True),
        "rounds_expert": lambda: drive(urls, ExpertPolicy(), "rounds", s, e, True),
    }
    drive(urls, RandomPolicy(), "rounds", s, s, True)  # warm the server and the imports
    runs: dict[str, list[dict]] = {name: [] for name in ["capacity", "capacity_two_callers", *contenders]}
    for _ in range(repeats):
        runs["capacity"].append(capacity(urls, s, rounds))
        runs["capacity_two_callers"].append(capacity_two_callers(urls, s, rounds))
        for name, run in contenders.items():
            runs[name].append(run())
    runs["capacity"].append(capacity(urls, s, rounds))
    median = {name: statistics.median(r["steps_per_s"] for r in results) for name, results in runs.items()}
    return {
        "median_steps_per_s": median,
        "share_of_batch_capacity": {name: median[name] / median["capacity"] for name in contenders},
        "share_of_two_caller_capacity": {name: median[name] / median["capacity_two_callers"] for name in contenders},
        "speedup_rounds_over_single_steps": median["rounds_random"] / median["threads_single_steps"],
        "runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="64,128", help="sessions in play, comma-separated (default 64,128)")
    parser.add_argument("--servers", type=int, default=1, help="bandit servers (default 1)")
    parser.add_argument("--episodes", type=int, default=1024, help="episodes per rounds run (default 1024)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each contender, interleaved (default 3)")
    parser.add_argument("--rounds", type=int, default=200, help="batch calls per capacity measurement")
    args = parser.parse_args()
    load_before = os.getloadavg()
    servers = [launch_server(["bandit"], workers=2) for _ in range(args.servers)]
    urls = [s.url for s in servers]
    try:
        by_sessions = {
            str(s): measure(urls, s, args.episodes, args.repeats, args.rounds)
            for s in (int(x) for x in args.sessions.split(","))
        }
    finally:
        for server in servers:
            server.stop()
    write_result(
        "driver_batch",
        {
            "command": f"python bench/bench_driver_batch.py --sessions {args.sessions} --servers {args.servers} "
            f"--episodes {args.episodes} --repeats {args.repeats}",
            "servers": args.servers,
            "by_sessions_in_play": by_sessions,
            "target": "a scripted policy (rounds) reaches >= 0.9 of the server's batch capacity",
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""RayEnvPool on a 2-node Ray cluster on this machine against the plain HTTP EnvPool, in the same run.

Inside a private network namespace (the script re-runs itself there: Ray binds every interface):
1. HTTP: two ``agentenvs serve --env bandit`` servers, the rollout driver with a random policy and
   ``--sessions`` episodes in play (rounds of batch steps).
2. Ray: a head and a worker node, each declaring ``{"bandit": SESSIONS}``; the same rollout through
   ``RayEnvPool`` (``--per-actor`` sessions per actor), sessions spread over both nodes.
3. The same again, killing the worker node's processes once a quarter of the episodes have finished:
   only the sessions on that node may fail (infra), every new session goes to the head.

    .venv/bin/python bench/bench_ray.py [--sessions 256 --episodes 1024 --per-actor 16] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from common import RESULTS, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

from agentenvs.ray_cluster import LocalCluster, private_network_command
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.scripted import RandomPolicy

INSIDE = "AGENTENVS_BENCH_PRIVATE_NET"


def rollout(pool, sessions: int, episodes: int, on_record=None) -> dict:
    """Random-policy bandit episodes through ``pool``: steps/s and the failure causes."""
    config = RolloutConfig(concurrency=sessions, progress=False, schedule="rounds")
    started = time.perf_counter()
    records = run_rollouts("bandit", RandomPolicy(), n=episodes, config=config, servers=pool, on_record=on_record)
    wall = time.perf_counter() - started
    return {
        "episodes": len(records),
        "steps": sum(r.num_turns for r in records),
        "wall_s": wall,
        "steps_per_s": sum(r.num_turns for r in records) / wall,
        "failure_causes": dict(Counter(r.failure_cause for r in records)),
        "errors": sorted({(r.error or "").split(":")[0] for r in records if r.error}),
    }


def http_baseline(sessions: int, episodes: int) -> dict:
    from agentenvs.client import EnvPool
    from agentenvs.servers.launch import launch_server

    servers = [launch_server(["bandit"], workers=2) for _ in range(2)]
    try:
        with EnvPool([s.url for s in servers]) as pool:
            rollout(pool, 8, 16)  # warm
            return rollout(pool, sessions, episodes)
    finally:
        for server in servers:
            server.stop()


def ray_runs(sessions: int, episodes: int, per_actor: int) -> dict:
    from agentenvs.ray_pool import RayEnvPool

    started = time.perf_counter()
    with LocalCluster(workers=1, cpus_per_node=1, resources={"bandit": sessions}) as cluster:
        cluster_up_s = time.perf_counter() - started
        with RayEnvPool(address=cluster.address, sessions_per_actor=per_actor) as pool:
            head = pool.ray.get_runtime_context().get_node_id()
            peak: dict[str, int] = {}

            def remember_load(record) -> None:
                if not peak:
                    peak.update(pool.load())

            rollout(pool, sessions, sessions)  # warm: the actors are made once and kept for the next runs
            steady = rollout(pool, sessions, episodes, on_record=remember_load)
            steady["sessions_per_node_at_first_record"] = sorted(peak.values())
            killed = kill_worker_mid_run(cluster, pool, head, sessions, episodes)
    return {"cluster_up_s": cluster_up_s, "steady": steady, "worker_killed": killed}


def kill_worker_mid_run(cluster: LocalCluster, pool, head: str, sessions: int, episodes: int) -> dict:
    """The rollout again; a quarter of the way in, the worker node dies."""
    seen = {"records": 0, "opened": 0}
    at_kill: dict[str, int] = {}

    def maybe_kill(record) -> None:
        seen["records"] += 1
        if seen["records"] == episodes // 4:
            cluster.kill_node(1)
            at_kill.update(pool.load())  # after the kill: the pool has not noticed yet, so it still counts them
            seen["opened"] = len(pool.opened)

    failures_before = len(pool.failures)
    run = rollout(pool, sessions, episodes, on_record=maybe_kill)
    lost = pool.failures[failures_before:]
    run.update(
        {
            "sessions_on_worker_at_kill": sum(n for node, n in at_kill.items() if node != head),
            "sessions_on_head_at_kill": at_kill.get(head, 0),
            "sessions_lost": len(lost),
            "lost_sessions_all_on_worker": all(f.node_id != head for f in lost),
            "sessions_opened_after_kill": len(pool.opened) - seen["opened"],
            "sessions_opened_after_kill_on_worker": sum(node != head for _, node in pool.opened[seen["opened"] :]),
        }
    )
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=256, help="episodes in play at once (default 256)")
    parser.add_argument("--episodes", type=int, default=1024, help="episodes per measurement (default 1024)")
    parser.add_argument("--per-actor", type=int, default=16, help="sessions per Ray actor (default 16)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for ray.json (default bench/results)")
    args = parser.parse_args()
    if os.environ.get(INSIDE) != "1":
        command = private_network_command([sys.executable, *sys.argv])
        if command is None:
            print("bench_ray: needs a private network namespace (unshare and ip, as root)", file=sys.stderr)
            return 2
        return subprocess.run(command, env=os.environ | {INSIDE: "1"}).returncode
    http = http_baseline(args.sessions, args.episodes)
    ray = ray_runs(args.sessions, args.episodes, args.per_actor)
    write_result(
        "ray",
        {
            "command": f"python bench/bench_ray.py --sessions {args.sessions} --episodes {args.episodes} "
            f"--per-actor {args.per_actor}",
            "sessions": args.sessions,
            "http_env_pool_2_servers": http,
            "ray_env_pool_2_nodes": ray,
            "ratio_ray_over_http": ray["steady"]["steps_per_s"] / http["steps_per_s"],
        },
        results=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

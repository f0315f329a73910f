"""ALFWorld benchmarks: ``python bench/bench_alfworld.py`` writes ``bench/results/alfworld.json``.

Measured in one run:

- generation time of the two valid panels on 2 processes, into a scratch root, and whether the
  result is byte-identical to the committed panels;
- in-process ``reset`` (a game not loaded before, and the same game again) and ``step`` medians over
  expert walkthroughs, plain and privileged (the planner replans every step);
- resident memory of one process holding one environment, and the growth per extra instance;
- ``--sessions`` (16) concurrent sessions on one HTTP server with two workers;
- the random-admissible baseline's success per task type (``--random-games`` per type);
- the expert walkthrough's success on every game of every panel (``--expert-splits``).
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import agentenvs
from agentenvs import panels
from bench.common import Episode, play_concurrently, summarize, timed, write_result

SPLITS = ("train", "valid_seen", "valid_unseen")


def generation(processes: int) -> dict[str, Any]:
    from agentenvs.tasks.alfworld.generate import generate

    with tempfile.TemporaryDirectory(prefix="alfworld-gen-") as root:
        _, seconds = generate(["valid_seen", "valid_unseen"], root=Path(root), processes=processes, progress=False)
        identical = all(
            (Path(root) / "alfworld" / "panels" / f"{split}.jsonl").read_bytes()
            == (panels.panel_dir("alfworld") / "panels" / f"{split}.jsonl").read_bytes()
            for split in ("valid_seen", "valid_unseen")
        )
    return {"games": 274, "processes": processes, "seconds": seconds, "per_game_s": seconds / 274,
            "identical_to_committed": identical}  # fmt: skip


def latency(tasks: list[dict[str, Any]], privileged: bool) -> dict[str, Any]:
    env = agentenvs.make("alfworld", privileged=privileged)
    first, again, steps = [], [], []
    for task in tasks:
        options = {"task_id": task["task_id"], "split": task["_split"]}
        first.append(timed(env.reset, seed=0, options=options)[1])
        for action in task["walkthrough"]:
            steps.append(timed(env.step, action)[1])
        again.append(timed(env.reset, seed=0, options=options)[1])
    env.close()
    return {"reset_new_game": summarize(first), "reset_same_game": summarize(again), "step": summarize(steps)}


MEMORY_SCRIPT = textwrap.dedent(
    """
    import gc, json, sys, psutil, agentenvs
    from agentenvs import panels
    tasks = [t for t in panels.load_panel("alfworld", "valid_seen")][:int(sys.argv[1])]
    start = psutil.Process().memory_info().rss
    envs, rss = [], []
    for task in tasks:
        env = agentenvs.make("alfworld")
        env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
        for action in task["walkthrough"]:
            env.step(action)
        envs.append(env)
        gc.collect()
        rss.append(psutil.Process().memory_info().rss)
    print(json.dumps({"before_mb": start / 2**20, "rss_mb": [r / 2**20 for r in rss]}))
    """
)


def memory(instances: int) -> dict[str, Any]:
    import json

    answer = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(instances)], capture_output=True, text=True,
                            check=True, timeout=1800)  # fmt: skip
    data = json.loads(answer.stdout)
    rss = data["rss_mb"]
    return {
        "process_rss_mb_one_instance": rss[0],
        "interpreter_and_imports_mb": data["before_mb"],
        "rss_mb_by_instances": rss,
        "per_extra_instance_mb": (rss[-1] - rss[0]) / max(1, len(rss) - 1),
    }


def random_baseline(games_per_type: int, seed: int = 0) -> dict[str, Any]:
    env = agentenvs.make("alfworld")
    rng = np.random.default_rng(seed)
    by_type: dict[str, list[bool]] = defaultdict(list)
    for split in ("valid_seen", "valid_unseen"):
        tasks = panels.load_panel("alfworld", split)
        for task_type in sorted({t["task_type"] for t in tasks}):
            for task in [t for t in tasks if t["task_type"] == task_type][:games_per_type]:
                _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": split})
                done = False
                while not done:
                    actions = info["admissible_actions"]
                    _, _, terminated, truncated, info = env.step(actions[int(rng.integers(len(actions)))])
                    done = terminated or truncated
                by_type[task_type].append(bool(info["success"]))
    env.close()
    return {
        "games_per_type_per_split": games_per_type,
        "splits": ["valid_seen", "valid_unseen"],
        "success_by_type": {k: sum(v) / len(v) for k, v in sorted(by_type.items())},
        "episodes_by_type": {k: len(v) for k, v in sorted(by_type.items())},
        "success_overall": sum(sum(v) for v in by_type.values()) / sum(len(v) for v in by_type.values()),
    }


def _replay_walkthroughs(job: tuple[str, list[str]]) -> list[str]:
    """Play each task's stored walkthrough in one environment; the ids of the games it did not solve."""
    split, task_ids = job
    env = agentenvs.make("alfworld")
    by_id = {t["task_id"]: t for t in panels.load_panel("alfworld", split)}
    failed = []
    for task_id in task_ids:
        env.reset(seed=0, options={"task_id": task_id, "split": split})
        for action in by_id[task_id]["walkthrough"]:
            _, _, terminated, _, info = env.step(action)
        if not (terminated and info["success"]):
            failed.append(task_id)
    env.close()
    return failed


def expert(splits: list[str], processes: int = 2) -> dict[str, Any]:
    """The expert walkthrough on every game of every panel, over ``processes`` worker processes."""
    import multiprocessing

    result = {}
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for split in splits:
            ids = [t["task_id"] for t in panels.load_panel("alfworld", split)]
            started = time.perf_counter()
            chunks = [(split, ids[i :: processes * 4]) for i in range(processes * 4)]
            failed = [task_id for part in pool.map(_replay_walkthroughs, chunks) for task_id in part]
            result[split] = {"games": len(ids), "solved": len(ids) - len(failed), "success": 1 - len(failed) / len(ids),
                             "failed": failed[:10], "seconds": time.perf_counter() - started}  # fmt: skip
    return result


def server_sessions(sessions: int, episodes: int) -> dict[str, Any]:
    """``sessions`` threads, each with its own remote session, playing walkthroughs at once on one server."""
    from agentenvs.servers.launch import launch_server

    tasks = panels.load_panel("alfworld", "valid_unseen")

    def pick(index: int, episode: int) -> Episode:
        task = tasks[(index * episodes + episode) % len(tasks)]
        return {"task_id": task["task_id"], "split": "valid_unseen"}, task["task_id"], task["walkthrough"]

    args = ("--setup-timeout", "600", "--step-timeout", "300", "--max-sessions", str(sessions * 2))
    with launch_server(["alfworld"], workers=2, extra_args=args) as server:
        return {"workers": 2, **play_concurrently(server.url, "alfworld", sessions, episodes, pick)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--latency-games", type=int, default=4, help="games per task type and valid split timed in-process"
    )
    parser.add_argument("--memory-instances", type=int, default=4, help="environments held in one process for memory")
    parser.add_argument("--sessions", type=int, default=16, help="concurrent server sessions (0 skips)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per server session")
    parser.add_argument(
        "--random-games", type=int, default=10, help="games per task type and valid split, random policy"
    )
    parser.add_argument("--expert-splits", nargs="*", default=list(SPLITS), choices=SPLITS,
                        help="panels the expert plays in full (all by default)")  # fmt: skip
    parser.add_argument("--no-generation", action="store_true", help="skip timing the valid panels' generation")
    args = parser.parse_args()

    result: dict[str, Any] = {}
    if not args.no_generation:
        result["generation_valid_panels"] = generation(processes=2)
        print("generation", result["generation_valid_panels"], flush=True)
    sample = []
    for split in ("valid_seen", "valid_unseen"):
        tasks = panels.load_panel("alfworld", split)
        for task_type in sorted({t["task_type"] for t in tasks}):
            sample += [dict(t, _split=split) for t in tasks if t["task_type"] == task_type][: args.latency_games]
    result["in_process"] = latency(sample, privileged=False)
    result["in_process_privileged_planner"] = latency(sample[:: max(1, len(sample) // 6)], privileged=True)
    print("latency", result["in_process"], flush=True)
    gc.collect()
    result["memory"] = memory(args.memory_instances)
    print("memory", result["memory"], flush=True)
    if args.sessions:
        result["server"] = server_sessions(args.sessions, args.episodes)
        print("server", result["server"], flush=True)
    result["random_admissible"] = random_baseline(args.random_games)
    print("random", result["random_admissible"], flush=True)
    if args.expert_splits:
        result["expert_walkthrough"] = expert(args.expert_splits)
    write_result("alfworld", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

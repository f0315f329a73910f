"""Freeze ScienceWorld's task panels: ``python -m agentenvs.tasks.sciworld.generate``.

Splits follow the package's own train/dev/test variation splits of each of the 30 tasks:

- ``test``: ``--per-task`` (5) variations per task drawn with a fixed seed from the package's test split;
- ``dev``: ``--dev-per-task`` (2) per task from the package's dev split;
- ``train``: every train variation of every task (ids only; the engine plans its gold path on demand).

Every test and dev task stores the engine's gold action sequence, and is kept only after that
sequence, replayed on a freshly loaded world exactly as the environment plays it, reaches score 100;
a variation whose gold path fails is replaced by the next one drawn and listed in the manifest.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from agentenvs import panels
from agentenvs.envs.sciworld.engine import load_world, raw_score, task_names, variations
from agentenvs.envs.sciworld.jvm import ScienceWorldJVM
from agentenvs.seeding import rng_for

GENERATOR_VERSION = "1"
SEED = 20261202
ENV = "sciworld"


def task_id(task_name: str, variation: int) -> str:
    return f"{task_name}-v{variation}"


def topics() -> dict[str, str]:
    """Task name to the package's topic (Matter, Biology...), from the wheel's ``tasks.json``."""
    rows = json.loads(resources.files("scienceworld").joinpath("tasks.json").read_text(encoding="utf-8"))
    return {row["task_name"].replace("mendellian", "mendelian"): row["topic"] for row in rows}


def solved_task(jvm: ScienceWorldJVM, name: str, variation: int, split: str, topic: str) -> dict[str, Any] | None:
    """The panel row of one variation with its gold path, or None when the gold path does not reach 100."""
    load_world(jvm, name, variation, "", gold=True)
    gold = [str(a) for a in jvm.call("getGoldActionSequence")]
    description = str(jvm.call("getTaskDescription"))
    load_world(jvm, name, variation, "")
    for action in gold:
        jvm.call("step", action)
    if raw_score(jvm) < 100:
        return None
    return {
        "task_id": task_id(name, variation),
        "task_type": name,
        "task_name": name,
        "variation": variation,
        "sw_split": split,
        "topic": topic,
        "description": description,
        "gold": gold,
        "gold_length": len(gold),
    }


def pick(jvm: ScienceWorldJVM, name: str, pool: list[int], count: int, split: str, topic: str, rejected: list[str]):
    """``count`` solved variations drawn in a seeded order from ``pool``."""
    order = [pool[i] for i in rng_for(ENV, "panel", split, name, SEED).permutation(len(pool))]
    rows = []
    for variation in order:
        if len(rows) == count:
            break
        row = solved_task(jvm, name, variation, split, topic)
        if row is None:
            rejected.append(task_id(name, variation))
        else:
            rows.append(row)
    return sorted(rows, key=lambda r: r["variation"])


def build_task(name: str, per_task: int, dev_per_task: int, topic: str, jvm: ScienceWorldJVM) -> dict[str, Any]:
    splits = variations(jvm, name)
    rejected: list[str] = []
    test = pick(jvm, name, splits["test"], per_task, "test", topic, rejected)
    dev = pick(jvm, name, splits["dev"], dev_per_task, "dev", topic, rejected)
    train = [
        {
            "task_id": task_id(name, v),
            "task_type": name,
            "task_name": name,
            "variation": v,
            "sw_split": "train",
            "topic": topic,
        }
        for v in splits["train"]
    ]
    return {
        "test": test,
        "dev": dev,
        "train": train,
        "rejected": rejected,
        "sizes": {k: len(v) for k, v in splits.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.tasks.sciworld.generate",
        description="Regenerate ScienceWorld's frozen panels (tasks/sciworld/panels/*.jsonl and manifest.json). "
        "Needs the scienceworld package and Java; takes about 15 minutes on 2 cores.",
    )
    parser.add_argument("--per-task", type=int, default=5, help="test variations per task (default 5)")
    parser.add_argument("--dev-per-task", type=int, default=2, help="dev variations per task (default 2)")
    parser.add_argument("--jobs", type=int, default=2, help="JVMs working in parallel (default 2)")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all 30)")
    args = parser.parse_args(argv)
    from tqdm import tqdm

    probe = ScienceWorldJVM()
    probe.start()
    try:
        names = [n for n in task_names(probe) if not args.tasks or n in args.tasks.split(",")]
    finally:
        probe.close()
    topic = topics()
    jvms = [ScienceWorldJVM() for _ in range(max(1, args.jobs))]
    free = list(jvms)

    def work(name: str) -> dict[str, Any]:
        jvm = free.pop()
        try:
            jvm.start()
            return build_task(name, args.per_task, args.dev_per_task, topic.get(name, ""), jvm)
        finally:
            free.append(jvm)

    try:
        with ThreadPoolExecutor(len(jvms)) as pool:
            results = list(tqdm(pool.map(work, names), total=len(names), desc="sciworld tasks", unit="task"))
    finally:
        for jvm in jvms:
            jvm.close()
    by_split: dict[str, list[dict[str, Any]]] = {"test": [], "dev": [], "train": []}
    for result in results:
        for split in by_split:
            by_split[split].extend(result[split])
    path = panels.write_panels(
        ENV,
        by_split,
        generator_version=GENERATOR_VERSION,
        seed=SEED,
        extra={
            "engine": "scienceworld==1.2.3",
            "per_task": {"test": args.per_task, "dev": args.dev_per_task},
            "rejected_gold_paths": sorted(r for result in results for r in result["rejected"]),
            "package_split_sizes": {n: r["sizes"] for n, r in zip(names, results, strict=True)},
            "max_gold_length": max(t["gold_length"] for s in ("test", "dev") for t in by_split[s]),
        },
    )
    print(f"wrote {path}: " + ", ".join(f"{k} {len(v)}" for k, v in by_split.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

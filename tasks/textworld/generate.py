"""Freeze the TextWorld panels: ``python -m agentenvs.tasks.textworld.generate [--jobs 2]``.

Per family and level: ``train`` games of the train distribution, ``valid`` and ``test`` games of the
held-out ones (cooking: foods and preparations TextWorld keeps out of train; simple: its test
objects; coin and treasure: other layout seeds), plus ``demo`` (one level-1 game per family, the
default split). Each game is built, replayed by its walkthrough to a win, and recorded with its
sha256, so every machine rebuilds and checks exactly these games.
"""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.envs.textworld.games import FAMILIES, GENERATOR_VERSION, game_digest, generate
from agentenvs.seeding import derive_seed

SEED = 20261206
SIZES = {"train": 5, "valid": 2, "test": 3}
"""Games per family and level in each split."""


def plan() -> dict[str, list[dict[str, Any]]]:
    """Every split's rows before their games exist: task id, family, level, kind, seed, turn limit."""
    rows: dict[str, list[dict[str, Any]]] = {split: [] for split in [*SIZES, "demo"]}
    for family, spec in FAMILIES.items():
        for level in spec["levels"]:
            for split, count in SIZES.items():
                for index in range(count):
                    rows[split].append(row(family, level, split, split, index))
        rows["demo"].append(row(family, 1, "test", "demo", 0))
    return rows


def row(family: str, level: int, kind: str, split: str, index: int) -> dict[str, Any]:
    seed = derive_seed("textworld", SEED, family, level, split, index) % 65536
    return {
        "task_id": f"{family}-l{level}-{split}-{index:03d}",
        "task_type": family,
        "family": family,
        "level": level,
        "kind": kind,
        "seed": seed,
        "max_turns": FAMILIES[family]["max_turns"],
    }


def build(task: dict[str, Any]) -> dict[str, Any]:
    """Generate ``task``'s game (its walkthrough replayed to a win in the same child process), complete the row."""
    with tempfile.TemporaryDirectory(prefix="agentenvs-textworld-") as scratch:
        folder = Path(scratch)
        summary = generate(task["family"], task["level"], task["kind"], task["seed"], folder)
        if not summary.pop("walkthrough_wins"):
            raise SystemExit(f"{task['task_id']}: the generated game's walkthrough does not win it")
        return {**task, **summary, "game_sha256": game_digest(folder)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2, help="games built at once (each in its own process)")
    args = parser.parse_args(argv)
    from tqdm import tqdm

    planned = plan()
    todo = [task for rows in planned.values() for task in rows]
    with ThreadPoolExecutor(args.jobs) as pool, tqdm(total=len(todo), desc="textworld games") as bar:
        built = {}
        for task, done in zip(todo, pool.map(build, todo), strict=True):
            built[task["task_id"]] = done
            bar.update()
    splits = {split: [built[task["task_id"]] for task in rows] for split, rows in planned.items()}
    levels = {family: spec["levels"] for family, spec in FAMILIES.items()}
    extra = {"engine": {"textworld": "1.7.0"}, "sizes": SIZES, "families": levels}
    print(panels.write_panels("textworld", splits, generator_version=GENERATOR_VERSION, seed=SEED, extra=extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

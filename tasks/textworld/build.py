"""``agentenvs tasks build textworld``: build (or rebuild) panel games in the cache, checked by sha256.

Games are built on first use anyway; this builds a whole split ahead of a run (a server, a CI cache)
and rebuilds a corrupt cached game (``--force``), the command the environment's errors name.
"""

from __future__ import annotations

import argparse
import shutil

from agentenvs import panels
from agentenvs.envs.textworld.games import cache_dir, game_folder, materialise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentenvs tasks build textworld", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--split", help="every game of a panel split (train, valid, test, demo)")
    which.add_argument("--task", help="one game, by task id (e.g. cooking-l2-test-001)")
    parser.add_argument("--force", action="store_true", help="delete the cached games first and rebuild them")
    args = parser.parse_args(argv)
    splits = panels.splits("textworld")
    if args.split is not None and args.split not in splits:
        parser.error(f"no split {args.split!r}; the splits are {sorted(splits)}")
    tasks = [t for s in splits for t in panels.load_panel("textworld", s) if args.task in (None, t["task_id"])]
    if args.split is not None:
        tasks = list(panels.load_panel("textworld", args.split))
    if not tasks:
        parser.error(f"no task {args.task!r} in the panels (ids look like cooking-l2-test-001)")
    from tqdm import tqdm

    for task in tqdm(tasks, desc="textworld games"):
        if args.force:
            shutil.rmtree(game_folder(task), ignore_errors=True)
        materialise(task)
    print(f"{len(tasks)} games built and checked in {cache_dir() / 'games'}")
    return 0

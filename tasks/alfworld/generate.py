"""Deterministic generator of the ALFWorld panels: ``python -m agentenvs.tasks.alfworld.generate``.

Each game is drawn from a generator seeded by (version, seed, split, task type, index, attempt),
solved with fast-downward, and kept only when the planner finds a plan; the plan is stored as the
expert walkthrough. Drawing and solving are per game, so the output does not depend on how the
work is spread over processes: the same seed gives byte-identical panels.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

from agentenvs.panels import tasks_root, write_panels
from agentenvs.seeding import derive_seed, rng_for
from agentenvs.tasks.alfworld.problem import TASK_TYPES, build_game, game_sha256
from agentenvs.tasks.alfworld.sampler import HELD_OUT_CLASSES, NoCandidate, draw_spec

GENERATOR_VERSION = "1"
SEED = 20261202
MAX_ATTEMPTS = 50
SPLIT_SIZES: dict[str, dict[str, int]] = {
    split: dict(zip(TASK_TYPES, counts, strict=True))
    for split, counts in (
        ("train", (133, 52, 110, 78, 90, 137)),
        ("valid_seen", (35, 13, 27, 16, 25, 24)),
        ("valid_unseen", (24, 18, 31, 23, 21, 17)),
    )
}
"""Games per split and task type: the official valid splits' exact mix (140 and 134 games) and the
official train mix (3,553 games) scaled to 600."""
SPLIT_CODES = {"train": "t", "valid_seen": "s", "valid_unseen": "u"}

_SOLVER: Any = None


def jobs(splits: list[str]) -> list[tuple[str, str, int]]:
    return [(split, task_type, index) for split in splits for task_type in TASK_TYPES
            for index in range(SPLIT_SIZES[split][task_type])]  # fmt: skip


def _worker_init() -> None:
    global _SOLVER
    from agentenvs.tasks.alfworld.solve import Solver

    _SOLVER = Solver()


def make_task(job: tuple[str, str, int], seed: int = SEED) -> dict[str, Any]:
    """Draw and solve one game; the first solvable attempt is kept."""
    split, task_type, index = job
    for attempt in range(MAX_ATTEMPTS):
        parts = ("alfworld-panel", GENERATOR_VERSION, seed, split, task_type, index, attempt)
        try:
            spec = draw_spec(rng_for(*parts), split, task_type)
        except NoCandidate:
            continue
        params = spec["params"]
        where = params["parent_target"] or params["toggle_target"]
        trial = f"trial_{SPLIT_CODES[split]}{index:05d}"
        spec["trial"] = trial
        spec["task_id"] = f"{task_type}-{params['object_target']}-None-{where}-{spec['floor_plan']}/{trial}"
        spec["seed"] = derive_seed(*parts)
        walkthrough = _SOLVER.walkthrough(spec)
        if walkthrough is None:
            continue
        spec["walkthrough"] = walkthrough
        spec["game_sha256"] = game_sha256(build_game(spec))
        return spec
    raise RuntimeError(f"no solvable game for {job} in {MAX_ATTEMPTS} attempts; the generator's rules are too tight")


def build_panels(splits: list[str], *, seed: int = SEED, processes: int = 2, progress: bool = True) -> dict[str, list]:
    """Every split's games, in a fixed order (task type, then index)."""
    from tqdm import tqdm

    todo = jobs(splits)
    results: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn" if sys.platform == "darwin" else "fork")
    with context.Pool(processes, initializer=_worker_init) as pool:
        stream = pool.imap(_make_task_default_seed if seed == SEED else _SeededJob(seed), todo, chunksize=1)
        for task in tqdm(stream, total=len(todo), desc="alfworld games", unit="game", disable=not progress):
            results.append(task)
    return {split: [t for t, job in zip(results, todo, strict=True) if job[0] == split] for split in splits}


def _make_task_default_seed(job: tuple[str, str, int]) -> dict[str, Any]:
    return make_task(job)


class _SeededJob:
    def __init__(self, seed: int):
        self.seed = seed

    def __call__(self, job: tuple[str, str, int]) -> dict[str, Any]:
        return make_task(job, self.seed)


def generate(splits: list[str], *, root: Path | None = None, seed: int = SEED, processes: int = 2,
             progress: bool = True) -> tuple[Path, float]:  # fmt: skip
    """Write the panels and manifest under ``root``; returns the manifest path and the seconds taken."""
    start = time.perf_counter()
    panels = build_panels(splits, seed=seed, processes=processes, progress=progress)
    elapsed = time.perf_counter() - start
    extra = {
        "task_types": list(TASK_TYPES),
        "held_out_classes": sorted(HELD_OUT_CLASSES),
        "split_sizes": {s: SPLIT_SIZES[s] for s in splits},
        "engine": {"alfworld": _version("alfworld"), "textworld": _version("textworld")},
    }
    manifest = write_panels("alfworld", panels, generator_version=GENERATOR_VERSION, seed=seed, root=root, extra=extra)
    return manifest, elapsed


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.tasks.alfworld.generate",
        description="Generate the ALFWorld panels (train, valid_seen, valid_unseen): draw games from the "
        "floor plans and tables in the alfworld wheel, solve each with fast-downward, keep the solvable ones. "
        "Deterministic: the same seed writes byte-identical panels.",
    )
    parser.add_argument("--splits", nargs="+", default=list(SPLIT_SIZES), choices=list(SPLIT_SIZES),
                        help="splits to write (all three by default; the manifest lists only these)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=SEED, help=f"generator seed (default {SEED}, the committed panels)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help="tasks root to write <root>/alfworld/ under (default: the package's tasks/)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    manifest, elapsed = generate(args.splits, root=args.out or tasks_root(), seed=args.seed, processes=args.processes)
    print(f"wrote {manifest} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

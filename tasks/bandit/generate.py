"""Deterministic generator of the bandit panels: ``python -m agentenvs.tasks.bandit.generate``.

Every task is drawn from a generator seeded by (version, seed, split, task type, index), so the
output is byte-identical on every machine and a test can check the committed panels against it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentenvs.panels import panel_dir, write_panels
from agentenvs.seeding import rng_for

GENERATOR_VERSION = "1"
SEED = 20261202
DISTRIBUTIONS = ("bernoulli", "gaussian")
ARM_COUNTS = (2, 5, 10)
HORIZONS = {2: 40, 5: 60, 10: 100}
"""Pulls per episode by number of arms: enough for a good strategy to find the best arm."""
SPLIT_SIZES = {"train": 50, "test": 10}
"""Tasks per split and task type; six task types give 300 train and 60 test tasks."""
ARM_NAMES = (
    "red", "blue", "green", "amber", "violet", "teal", "coral", "indigo", "olive", "crimson",
    "silver", "gold", "ivory", "jade", "maroon", "navy", "peach", "plum", "rust", "sky",
)  # fmt: skip
MEAN_RANGE = (0.05, 0.95)
"""Arm means stay positive, so an invalid pull (reward 0) is never better than any arm."""
STD_RANGE = (0.1, 0.3)
MIN_BEST_GAP = 0.05
"""The best arm beats the second best by at least this much, so "the best arm" is well defined."""


def task_type(distribution: str, k: int) -> str:
    return f"{distribution}-k{k}"


def make_task(split: str, distribution: str, k: int, index: int) -> dict[str, Any]:
    """One task: arm names, true means (and noise std for Gaussian arms) and the horizon."""
    kind = task_type(distribution, k)
    rng = rng_for("bandit-panel", GENERATOR_VERSION, SEED, split, kind, index)
    names = [str(name) for name in rng.choice(ARM_NAMES, size=k, replace=False)]
    while True:
        means = sorted(round(float(m), 3) for m in rng.uniform(*MEAN_RANGE, size=k))
        if means[-1] - means[-2] >= MIN_BEST_GAP:
            break
    means = [float(m) for m in rng.permutation(means)]
    task: dict[str, Any] = {
        "task_id": f"{kind}-{split}-{index:03d}",
        "task_type": kind,
        "distribution": distribution,
        "arms": names,
        "means": means,
        "horizon": HORIZONS[k],
    }
    if distribution == "gaussian":
        task["stds"] = [round(float(s), 3) for s in rng.uniform(*STD_RANGE, size=k)]
    return task


def build_panels() -> dict[str, list[dict[str, Any]]]:
    """Every split's tasks, in a fixed order (task type, then index)."""
    return {
        split: [
            make_task(split, distribution, k, index)
            for distribution in DISTRIBUTIONS
            for k in ARM_COUNTS
            for index in range(size)
        ]
        for split, size in SPLIT_SIZES.items()
    }


def generate(root: Path | None = None) -> Path:
    """Write the panels and manifest under ``root`` (default: the package's ``tasks/``)."""
    extra = {
        "task_types": [task_type(d, k) for d in DISTRIBUTIONS for k in ARM_COUNTS],
        "horizons": {f"k{k}": h for k, h in HORIZONS.items()},
    }
    return write_panels(
        "bandit", build_panels(), generator_version=GENERATOR_VERSION, seed=SEED, root=root, extra=extra
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.tasks.bandit.generate",
        description="Regenerate the frozen bandit panels (byte-identical unless the generator changed).",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="folder to write <root>/bandit/ into (default: the spec's folder)",
    )
    args = parser.parse_args(argv)
    manifest = generate(args.root)
    print(f"wrote {manifest} (panels under {panel_dir('bandit', args.root) / 'panels'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

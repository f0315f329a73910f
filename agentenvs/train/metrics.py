"""The training log: one JSON object per step in ``metrics.jsonl``, and the curves as a PNG."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.rollout.records import EpisodeRecord
from agentenvs.rollout.store import JsonlLog

METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "curves.png"
PLOTTED = (
    ("reward/mean", "mean episode return"),
    ("success/rate", "success rate"),
    ("eval/return", "eval return (held out)"),
    ("loss/kl_ref", "KL to reference (k3)"),
    ("loss/entropy", "entropy"),
    ("loss/clip_fraction", "clip fraction"),
    ("perf/tokens_per_s", "tokens/s"),
)


def episode_metrics(records: Sequence[EpisodeRecord], prefix: str) -> dict[str, float]:
    """Return, success, score, turns and failure counts of a set of episodes."""
    if not records:
        return {}
    n = len(records)
    returns = [r.return_ for r in records]
    mean = sum(returns) / n
    invalid = sum(1 for r in records for s in r.steps if s.info.get("action_valid") is False)
    steps = sum(len(r.steps) for r in records)
    return {
        f"{prefix}/mean": mean,
        f"{prefix}/std": math.sqrt(sum((x - mean) ** 2 for x in returns) / n),
        f"{prefix}/success": sum(r.success for r in records) / n,
        f"{prefix}/score": sum(r.score for r in records) / n,
        f"{prefix}/turns": steps / n,
        f"{prefix}/invalid_action_rate": invalid / max(steps, 1),
        f"{prefix}/dropped_infra": sum(not r.usable_for_training for r in records),
    }


class MetricsLog:
    """Appends one line per step (an ``agentenvs.rollout.store.JsonlLog``: durable, a torn last line
    from a killed run recovered); reading it back gives the run's history (also after a resume)."""

    def __init__(self, out: str | Path):
        self.path = Path(out) / METRICS_FILE
        self._log = JsonlLog(self.path)

    def write(self, row: dict[str, Any]) -> None:
        self._log.append(row)

    def rows(self) -> list[dict[str, Any]]:
        return self._log.rows()

    def truncate_after(self, step: int) -> None:
        """Drop lines of steps after ``step`` (a resume from an earlier checkpoint redoes them)."""
        self._log.rewrite([row for row in self.rows() if row.get("step", 0) <= step])

    def close(self) -> None:
        self._log.close()


def plot_curves(rows: Sequence[dict[str, Any]], path: str | Path) -> Path | None:
    """A grid of the logged curves against the step; None when nothing was logged."""
    present = [(key, title) for key, title in PLOTTED if any(key in row for row in rows)]
    if not present:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 3
    lines = math.ceil(len(present) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.0 * lines), squeeze=False)
    for ax, (key, title) in zip(axes.flat, present, strict=False):
        points = [(row["step"], row[key]) for row in rows if key in row]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o" if len(points) < 30 else None)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present) :]:
        ax.axis("off")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path

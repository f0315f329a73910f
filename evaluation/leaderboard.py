"""The leaderboard: results JSON files in, a markdown page and a self-contained HTML page out.

Results live as committed JSON under ``evaluation/leaderboard/``; ``agentenvs leaderboard build``
collects every ``agentenvs.results/*`` file below a folder, groups them by environment and renders
``leaderboard.md`` and ``index.html`` (no network needed to view either).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.results import RESULTS_SCHEMA_PREFIX, policy_label


def committed_dir() -> Path:
    """The leaderboard results that ship with the package (``evaluation/leaderboard/``)."""
    return Path(str(resources.files("agentenvs.evaluation"))) / "leaderboard"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/agentenvs/evaluation`` (``~/.cache/...`` when unset): where runs and pages go by default."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentenvs" / "evaluation"


def default_site_dir() -> Path:
    return cache_dir() / "leaderboard"


@dataclass(frozen=True)
class Entry:
    """One results file, flattened to what a leaderboard row shows."""

    path: Path
    result: dict[str, Any]

    @property
    def env(self) -> str:
        return self.result["env"]["name"]

    @property
    def split(self) -> str:
        return self.result["env"]["split"]

    @property
    def label(self) -> str:
        return policy_label(self.result.get("policy") or {})

    @property
    def metrics(self) -> dict[str, Any]:
        return self.result["metrics"]

    @property
    def max_k(self) -> int:
        return max(int(k) for k in self.metrics["pass_at_k"])

    @property
    def row_id(self) -> str:
        """The run's id (``run_id``), or the file name for results written without one."""
        return str(self.result.get("run_id") or self.path.stem)


def load_results(folder: str | Path) -> list[Entry]:
    """Every results file below ``folder`` (files of other schemas are ignored), sorted by path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidArgument(f"results folder {folder} does not exist; pass --results DIR holding results JSON")
    entries = []
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and str(data.get("schema", "")).startswith(RESULTS_SCHEMA_PREFIX):
            entries.append(Entry(path, data))
    if not entries:
        raise InvalidArgument(
            f"no results files (schema agentenvs.results/1) below {folder}; write some with `agentenvs eval --out DIR`"
        )
    return entries


def by_env(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Entries grouped by environment, best success rate first within each."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.env, []).append(entry)
    for rows in groups.values():
        rows.sort(key=lambda e: (e.split, -e.metrics["success_rate"]["value"], e.label))
    return dict(sorted(groups.items()))


def env_metric_names(rows: list[Entry]) -> list[str]:
    """The environment's own metrics shown as columns (those any row of the table has; "–" where a row has
    none, e.g. a policy that never gave a forecast has no Brier score)."""
    return sorted(set().union(*(r.metrics.get("env_metrics", {}) for r in rows)))


def fmt_estimate(estimate: dict[str, Any], percent: bool = True) -> str:
    scale, digits = (100.0, 1) if percent else (1.0, 3)
    low, high = estimate["ci95"]
    return f"{estimate['value'] * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def columns(rows: list[Entry]) -> list[tuple[str, str, Any]]:
    """(key, header, cell function) of a table; the cell function returns (text, sort value)."""

    def metric(name: str, percent: bool = True) -> Any:
        return lambda e: (fmt_estimate(e.metrics[name], percent), e.metrics[name]["value"])

    def env_metric(name: str) -> Any:
        def cell(e: Entry) -> tuple[str, Any]:
            value = e.metrics.get("env_metrics", {}).get(name)
            return ("–", "") if value is None else (f"{value['value']:.3g}", value["value"])

        return cell

    def top_pass(e: Entry) -> tuple[str, float]:
        value = e.metrics["pass_at_k"][str(e.max_k)]
        return f"{fmt_estimate(value)} (k={e.max_k})", value["value"]

    cols: list[tuple[str, str, Any]] = [
        ("policy", "policy", lambda e: (e.label, e.label)),
        ("split", "split", lambda e: (e.split, e.split)),
        ("success", "success % [95% CI]", metric("success_rate")),
        ("score", "score % [95% CI]", metric("mean_score")),
        ("pass", "pass@k %", top_pass),
        ("turns", "turns", lambda e: (f"{e.metrics['mean_turns']['value']:.1f}", e.metrics["mean_turns"]["value"])),
    ]
    cols += [(f"env_{name}", name, env_metric(name)) for name in env_metric_names(rows)]
    cols += [
        ("tasks", "tasks", lambda e: (str(e.result["counts"]["tasks"]), e.result["counts"]["tasks"])),
        ("episodes", "episodes", lambda e: (str(e.result["counts"]["episodes"]), e.result["counts"]["episodes"])),
        ("date", "date", lambda e: (e.result["created_at"][:10], e.result["created_at"])),
    ]
    return cols


def render_markdown(entries: list[Entry]) -> str:
    """The leaderboard as markdown: one table per environment, intervals in brackets."""
    intro = (
        "Success and score in percent with seeded bootstrap 95% intervals over tasks; the environment's own "
        "metrics (mean over tasks) follow; the results JSON holds every interval."
    )
    lines = ["# agentenvs leaderboard", "", intro, ""]
    for env, rows in by_env(entries).items():
        first = rows[0].result["env"]
        lines += [f"## {env} (version {first['version']})", ""]
        cols = columns(rows)
        lines.append("| " + " | ".join(header for _, header, _ in cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for row in rows:
            lines.append("| " + " | ".join(cell(row)[0] for _, _, cell in cols) + " |")
        panels = sorted({(r.split, r.result["env"]["panel_hash"][:12]) for r in rows})
        lines += ["", "Panels: " + ", ".join(f"{split} `{digest}`" for split, digest in panels), ""]
    return "\n".join(lines)


def build(results: str | Path, out: str | Path) -> dict[str, Path]:
    """Render ``leaderboard.md`` and ``index.html`` from the results below ``results`` into ``out``."""
    from agentenvs.evaluation.page import render_html

    entries = load_results(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "leaderboard.md"
    markdown.write_text(render_markdown(entries) + "\n", encoding="utf-8")
    html = out / "index.html"
    html.write_text(render_html(entries), encoding="utf-8")
    return {"markdown": markdown, "html": html}

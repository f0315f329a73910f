"""Scorers: episode records (docs/rollout.md) in, leaderboard metrics out, with nothing run again.

Everything here reads only the fields of the episode record, so stored JSONL files can be re-scored
at any time (``agentenvs eval --rescore FILE``). Tasks are the unit of averaging and resampling:
each task weighs the same however many samples it has.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.metrics import estimate, k_grid, pass_at_k, pass_at_k_t
from agentenvs.rollout.store import EpisodeStore, episode_files

EXCLUDED_CAUSES = frozenset({"infra"})
"""Episodes that failed for infrastructure reasons say nothing about the policy; they are counted
in ``excluded`` and left out of every metric."""

RUN_KEY_FIELDS = ("env", "env_version", "split", "panel_hash")


def load_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The records of several episode files, or of every ``*.jsonl`` below a folder."""
    return [row for item in paths for file in episode_files(item, recursive=True) for row in EpisodeStore(file).rows()]


def run_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """What makes records comparable: environment, version, split, panel, policy and sampling."""
    policy = json.dumps(record.get("policy") or {}, sort_keys=True)
    sampling = json.dumps(record.get("sampling") or {}, sort_keys=True)
    return (*(record.get(f) for f in RUN_KEY_FIELDS), policy, sampling)


def group_runs(records: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Records split into runs (same :func:`run_key`), in order of first appearance."""
    runs: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for record in records:
        runs.setdefault(run_key(record), []).append(record)
    return list(runs.values())


CALIBRATION_KEYS = {"forecast_p", "outcome_y"}
"""Final-step metrics of a probability forecast and its 0/1 outcome (forecast): scored as a reliability
diagram and ECE (``metrics.calibration``), not averaged as columns."""


def final_metrics(record: dict[str, Any]) -> dict[str, float]:
    """The environment's own counters at the end of an episode (``info.metrics`` of its last step)."""
    for step in reversed(record.get("steps") or []):
        metrics = (step.get("info") or {}).get("metrics")
        if isinstance(metrics, dict):
            return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {}


def invalid_action_rate(record: dict[str, Any]) -> float | None:
    """Fraction of an episode's steps whose action the environment could not carry out."""
    flags = [(s.get("info") or {}).get("action_valid") for s in record.get("steps") or []]
    flags = [f for f in flags if isinstance(f, bool)]
    return None if not flags else sum(1 for f in flags if not f) / len(flags)


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


class _Task:
    """The samples of one task, reduced to the numbers the estimators need."""

    def __init__(self, task_id: str, records: list[dict[str, Any]]):
        self.task_id = task_id
        self.task_type = next((r.get("task_type") for r in records if r.get("task_type")), None) or "unspecified"
        self.n = len(records)
        self.successes = sum(1 for r in records if r.get("success"))
        self.success_turns = [r.get("success_turn") if r.get("success") else None for r in records]
        self.score = float(np.mean([float(r.get("score") or 0.0) for r in records]))
        self.ret = float(np.mean([float(r.get("return") or 0.0) for r in records]))
        self.turns = float(np.mean([int(r.get("num_turns") or 0) for r in records]))
        self.invalid = _mean([invalid_action_rate(r) for r in records])
        per_episode = [final_metrics(r) for r in records]
        self.forecasts = [(m["forecast_p"], m["outcome_y"]) for m in per_episode if set(m) >= CALIBRATION_KEYS]
        per_episode = [{k: v for k, v in m.items() if k not in CALIBRATION_KEYS} for m in per_episode]
        names = sorted({name for m in per_episode for name in m})
        self.env_metrics = {name: _mean([m.get(name) for m in per_episode]) for name in names}


def _tasks(records: list[dict[str, Any]]) -> list[_Task]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_task[str(record["task_id"])].append(record)
    return [_Task(task_id, group) for task_id, group in sorted(by_task.items())]


def _pass_curve(tasks: list[_Task], ks: list[int], seed: tuple[Any, ...], resamples: int) -> dict[str, Any]:
    return {
        str(k): estimate([pass_at_k(t.n, t.successes, k) for t in tasks], seed=seed, resamples=resamples) for k in ks
    }


def _pass_grid(tasks: list[_Task], ks: list[int], max_turn: int) -> dict[str, Any]:
    turns = list(range(1, max_turn + 1))
    values = [[float(np.mean([pass_at_k_t(t.success_turns, k, turn) for t in tasks])) for turn in turns] for k in ks]
    return {"k": ks, "T": turns, "values": values}


def _metric_block(tasks: list[_Task], seed: tuple[Any, ...], resamples: int) -> dict[str, Any]:
    block: dict[str, Any] = {
        "success_rate": estimate([t.successes / t.n for t in tasks], seed=seed, resamples=resamples),
        "mean_score": estimate([t.score for t in tasks], seed=seed, resamples=resamples),
        "mean_return": estimate([t.ret for t in tasks], seed=seed, resamples=resamples),
        "mean_turns": estimate([t.turns for t in tasks], seed=seed, resamples=resamples),
    }
    invalid = [t.invalid for t in tasks if t.invalid is not None]
    if invalid:
        block["invalid_action_rate"] = estimate(invalid, seed=seed, resamples=resamples)
    return block


def score_records(
    records: Sequence[dict[str, Any]],
    *,
    max_turns: int | None = None,
    resamples: int = 2000,
) -> dict[str, Any]:
    """The metrics of one run (records that share environment, split, panel and policy).

    Returns success rate, mean score, return and turns, invalid-action rate, the environment's own
    metrics, pass@k on the grid 1, 2, 4, ..., n (n = the fewest samples any task has), the PASS@(k,T)
    grid for T = 1 ... ``max_turns`` (default: the longest episode), each with a seeded bootstrap
    95% interval over tasks, and the same headline numbers per task type.
    """
    if not records:
        raise InvalidArgument("no episode records to score; run `agentenvs eval` first or check the file")
    keys = {run_key(r)[: len(RUN_KEY_FIELDS)] for r in records}
    if len(keys) > 1:
        raise InvalidArgument(
            f"these records mix {len(keys)} runs (environment, version, split or panel differ); "
            "score each run on its own (scoring.group_runs splits them)"
        )
    kept = [r for r in records if r.get("failure_cause") not in EXCLUDED_CAUSES]
    excluded = Counter(str(r.get("failure_cause")) for r in records if r.get("failure_cause") in EXCLUDED_CAUSES)
    if not kept:
        raise InvalidArgument(f"all {len(records)} episodes failed for infrastructure reasons; nothing to score")
    tasks = _tasks(kept)
    first = records[0]
    seed = (first.get("env"), first.get("split"), first.get("panel_hash"))
    samples = [t.n for t in tasks]
    ks = k_grid(min(samples))
    horizon = int(max_turns or max(int(r.get("num_turns") or 0) for r in kept) or 1)
    metrics = _metric_block(tasks, seed, resamples)
    metrics["pass_at_k"] = _pass_curve(tasks, ks, seed, resamples)
    metrics["pass_at_k_t"] = _pass_grid(tasks, ks, horizon)
    names = sorted({name for t in tasks for name in t.env_metrics})
    metrics["env_metrics"] = {
        name: estimate(values, seed=seed, resamples=resamples)
        for name in names
        if (values := [v for t in tasks if (v := t.env_metrics.get(name)) is not None])
    }
    if pairs := [pair for t in tasks for pair in t.forecasts]:
        from agentenvs.forecast_scores import reliability

        metrics["calibration"] = reliability([p for p, _ in pairs], [int(y) for _, y in pairs])
    by_type: dict[str, Any] = {}
    for task_type in sorted({t.task_type for t in tasks}):
        members = [t for t in tasks if t.task_type == task_type]
        entry = _metric_block(members, (*seed, task_type), resamples)
        entry["pass_at_k"] = _pass_curve(members, [ks[-1]], (*seed, task_type), resamples)
        entry["n_tasks"] = len(members)
        by_type[task_type] = entry
    return {
        "counts": {
            "tasks": len(tasks),
            "episodes": len(kept),
            "samples_per_task": {"min": min(samples), "max": max(samples)},
            "excluded": dict(excluded),
            "end_reason": dict(Counter(str(r.get("end_reason")) for r in kept)),
            "failure_cause": dict(Counter(str(r.get("failure_cause")) for r in kept)),
        },
        "metrics": metrics,
        "by_task_type": by_type,
    }


def rescore(paths: Iterable[str | Path], *, resamples: int = 2000) -> list[dict[str, Any]]:
    """Score stored episode files without running anything: one entry per run found in them."""
    results = []
    for run in group_runs(load_records(paths)):
        first = run[0]
        entry = {field: first.get(field) for field in RUN_KEY_FIELDS}
        entry.update(policy=first.get("policy"), sampling=first.get("sampling"))
        entry.update(score_records(run, resamples=resamples))
        results.append(entry)
    return results

"""Proper scores for forecasts and calibration summaries (docs/forecast.md, "Scores").

Shared by the environment (``resolved`` mode), the resolver (backfilled rewards) and the leaderboard.
Every score is oriented so that higher is better where it becomes a reward (``reward``), and reported in
its usual orientation elsewhere (Brier and CRPS: lower is better; log score: higher is better).
"""

from __future__ import annotations

import math
from typing import Any

LOG_CLIP = 1e-4
"""Probabilities are clipped to [1e-4, 1 - 1e-4] before the log, so one confident miss costs at most ~9.2."""


def brier(kind: str, forecast: Any, outcome: Any) -> float:
    """Brier score: squared error of the probability vector (binary: one probability), in [0, 1] / [0, 2]."""
    if kind == "binary":
        return (float(forecast) - float(outcome)) ** 2
    if kind == "choice":
        return sum((p - (1.0 if option == outcome else 0.0)) ** 2 for option, p in forecast.items()) + (
            0.0 if outcome in forecast else 1.0
        )
    raise ValueError(f"no Brier score for a {kind} question")


def log_score(kind: str, forecast: Any, outcome: Any) -> float:
    """Log of the probability given to what happened, clipped at ``LOG_CLIP`` (higher is better, <= 0)."""
    if kind == "binary":
        p = float(forecast) if int(outcome) == 1 else 1.0 - float(forecast)
    elif kind == "choice":
        p = float(forecast.get(outcome, 0.0))
    else:
        raise ValueError(f"no log score for a {kind} question")
    return math.log(min(1.0 - LOG_CLIP, max(LOG_CLIP, p)))


def quantile_crps(quantiles: dict[str, float], outcome: float) -> float:
    """CRPS approximated by twice the mean pinball loss over the forecast's quantile levels (lower is better)."""
    losses = []
    for level_text, value in quantiles.items():
        level = float(level_text)
        diff = float(outcome) - float(value)
        losses.append(max(level * diff, (level - 1.0) * diff))
    return 2.0 * sum(losses) / len(losses)


def interval_score(low: float, high: float, outcome: float, alpha: float = 0.2) -> float:
    """Gneiting-Raftery interval score of a central (1 - alpha) interval (lower is better)."""
    score = high - low
    if outcome < low:
        score += 2.0 / alpha * (low - outcome)
    if outcome > high:
        score += 2.0 / alpha * (outcome - high)
    return score


def score_forecast(kind: str, forecast: Any, outcome: Any, scale: float = 1.0) -> dict[str, float]:
    """All scores of one resolved forecast plus ``reward`` in [0, 1] (1 - Brier, or 1 - CRPS / scale)."""
    if kind in ("binary", "choice"):
        b = brier(kind, forecast, outcome)
        top = 1.0 if kind == "binary" else 2.0
        return {"brier": b, "log": log_score(kind, forecast, outcome), "reward": 1.0 - b / top}
    crps = quantile_crps(forecast, outcome)
    levels = sorted(forecast, key=float)
    scores = {"crps": crps, "reward": max(0.0, 1.0 - crps / max(scale, 1e-9))}
    if len(levels) >= 2:
        low, high = forecast[levels[0]], forecast[levels[-1]]
        alpha = float(levels[0]) + 1.0 - float(levels[-1])
        scores["interval"] = interval_score(low, high, outcome, alpha if alpha > 0 else 0.2)
        scores["covered"] = float(low <= outcome <= high)
    return scores


def reliability(probs: list[float], outcomes: list[int], bins: int = 10) -> dict[str, Any]:
    """Reliability bins (mean forecast, observed frequency, count) and the expected calibration error."""
    if len(probs) != len(outcomes):
        raise ValueError("reliability needs one outcome per probability")
    rows = []
    ece = 0.0
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        members = [
            (p, y) for p, y in zip(probs, outcomes, strict=True) if low <= p < high or (index == bins - 1 and p == 1.0)
        ]
        if not members:
            continue
        mean_p = sum(p for p, _ in members) / len(members)
        freq = sum(y for _, y in members) / len(members)
        ece += len(members) / len(probs) * abs(mean_p - freq)
        rows.append({"low": low, "high": high, "mean_forecast": mean_p, "frequency": freq, "count": len(members)})
    return {"bins": rows, "ece": ece, "n": len(probs)}

"""Proper scores for forecasts and calibration summaries (docs/forecast.md, "Scores").

Shared by the environment (``resolved`` mode), the resolver (backfilled rewards) and the leaderboard, so a
forecast earns the same reward wherever it is scored. Every score is oriented so that higher is better where
it becomes a reward (``reward``, in [0, 1]), and reported in its usual orientation elsewhere (Brier and CRPS:
lower is better; log score: higher is better).

The reward of every kind is an affine function of a strictly proper score, never clipped: a clipped score
caps the loss of a bold miss and so pays gambling. Numeric forecasts are quantiles at levels the question
fixes; the reward is the quantile-grid CRPS (twice the mean pinball loss) of the forecast and the outcome
mapped through a logistic ``squash``, which keeps it in [0, 1] and, being strictly increasing, keeps the true
quantiles the unique best answer (the quantiles of ``squash(Y)`` are ``squash`` of the quantiles of ``Y``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

from agentenvs.errors import InvalidArgument

LOG_CLIP = 1e-4
"""Probabilities are clipped to [1e-4, 1 - 1e-4] before the log, so one confident miss costs at most ~9.2."""
DEFAULT_LEVELS = (0.1, 0.5, 0.9)
"""The quantile levels of a numeric question that names none."""
CHOICE_TOLERANCE = 0.01
"""A choice forecast's probabilities must sum to 1 within this; they are then normalised to sum to 1."""


def level_text(level: float) -> str:
    """The canonical key of a quantile level (``0.1`` -> ``"0.1"``)."""
    return f"{level:g}"


def quantile_levels(rules: Mapping[str, Any]) -> tuple[float, ...]:
    """The quantile levels a numeric question fixes (its ``quantiles``), in increasing order."""
    given = rules.get("quantiles")
    if given is None:
        return DEFAULT_LEVELS
    if not isinstance(given, (list, tuple)) or not given:
        raise InvalidArgument(f"quantiles must be a non-empty list of levels in (0, 1), got {given!r}")
    levels = []
    for text in given:
        try:
            level = float(text)
        except (TypeError, ValueError):
            raise InvalidArgument(f"quantile level {text!r} is not a number") from None
        if not 0.0 < level < 1.0:
            raise InvalidArgument(f"quantile level {text!r} must lie in (0, 1)")
        levels.append(level)
    if any(b <= a for a, b in itertools.pairwise(levels)):
        raise InvalidArgument(f"quantiles must be increasing and distinct, got {given!r}")
    return tuple(levels)


def check_rules(kind: str, rules: Mapping[str, Any]) -> None:
    """What scoring needs to know of a question, or :class:`InvalidArgument`: a choice question its
    ``options``; a numeric one a finite ``center`` and a positive ``scale`` (what the reward is measured on)
    and valid ``quantiles`` (optional)."""
    if kind == "choice":
        options = rules.get("options")
        if not isinstance(options, list) or len(options) < 2 or len(set(map(str, options))) != len(options):
            raise InvalidArgument(f"a choice question needs a list of at least two distinct options, got {options!r}")
    if kind != "numeric":
        return
    quantile_levels(rules)
    center, scale = rules.get("center"), rules.get("scale")
    if isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
        raise InvalidArgument(
            f"a numeric question needs a finite center (a value the outcome is expected near), got {center!r}"
        )
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise InvalidArgument(f"a numeric question needs a positive finite scale (its plausible spread), got {scale!r}")


def brier(kind: str, forecast: Any, outcome: Any) -> float:
    """Brier score: squared error of the probability vector (binary: one probability), in [0, 1] / [0, 2]."""
    if kind == "binary":
        return (float(forecast) - float(outcome)) ** 2
    if kind == "choice":
        missed = 0.0 if outcome in forecast else 1.0  # an option left out had probability 0
        return math.fsum([*((p - (1.0 if option == outcome else 0.0)) ** 2 for option, p in forecast.items()), missed])
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


def pinball(level: float, value: float, outcome: float) -> float:
    """The quantile (pinball) loss of ``value`` as the ``level`` quantile; its expectation is least at the
    true quantile."""
    diff = outcome - value
    return max(level * diff, (level - 1.0) * diff)


def quantile_crps(quantiles: Mapping[str, float], outcome: float) -> float:
    """CRPS approximated by twice the mean pinball loss over the quantile levels, on the outcome's own scale
    (a diagnostic, lower is better; the reward is :func:`numeric_reward`)."""
    losses = [pinball(float(level), float(value), float(outcome)) for level, value in quantiles.items()]
    return 2.0 * math.fsum(losses) / len(losses)


def squash(value: float, center: float, scale: float) -> float:
    """``1 / (1 + exp(-2 (value - center) / scale))``: onto (0, 1), slope ``1 / (2 scale)`` at ``center``, so
    an outcome within a scale of the center lands on its near-linear part (written to never overflow).

    The slope sets how much a forecast far off costs before the map saturates: with ``4 / scale`` the
    outcomes of the panel's questions reached the flat tails, and an interval of minus to plus infinity cost
    almost nothing more than an honest one."""
    z = (value - center) * 2.0 / scale
    tail = math.exp(-abs(z)) if math.isfinite(z) else 0.0
    return 1.0 / (1.0 + tail) if z >= 0 else tail / (1.0 + tail)


def numeric_reward(quantiles: Mapping[str, float], outcome: float, center: float, scale: float) -> float:
    """1 - the pinball loss of the squashed quantiles against the squashed outcome, divided by its largest
    possible value, ``max(sum(levels), sum(1 - levels))``: in [0, 1]; near ``center`` about
    1 - CRPS / (2 scale) (on a grid symmetric about 0.5).

    Bound: for u, v in [0, 1], pinball(t, v, u) <= max(t u, (1 - t)(1 - u)), whose sum over the levels is
    convex in u, so at most its value at u = 0 or u = 1."""
    levels = [float(level) for level in quantiles]
    target = squash(float(outcome), center, scale)
    loss = math.fsum(pinball(float(level), squash(float(v), center, scale), target) for level, v in quantiles.items())
    worst = max(math.fsum(levels), math.fsum(1.0 - level for level in levels))
    return min(1.0, max(0.0, 1.0 - loss / worst))  # the clamp only absorbs rounding; the bound holds exactly


def interval_score(low: float, high: float, outcome: float, alpha: float = 0.2) -> float:
    """Gneiting-Raftery interval score of a central (1 - alpha) interval (lower is better)."""
    score = high - low
    if outcome < low:
        score += 2.0 / alpha * (low - outcome)
    if outcome > high:
        score += 2.0 / alpha * (outcome - high)
    return score


def reference_forecast(kind: str, rules: Mapping[str, Any]) -> Any:
    """The uninformed forecast a question's success is measured against: 0.5 (binary), uniform over the
    options (choice), and for a number the quantiles of a normal around ``center`` with standard deviation
    ``scale / 2`` (no change from the last known value, with the question's spread). A degenerate reference
    (a point at ``center``) would not do: nearly any interval around it beats a point forecast."""
    if kind == "binary":
        return 0.5
    if kind == "choice":
        options = rules["options"]
        return {option: 1.0 / len(options) for option in options}
    spread = NormalDist(float(rules["center"]), float(rules["scale"]) / 2.0)
    return {level_text(level): spread.inv_cdf(level) for level in quantile_levels(rules)}


def _reward(kind: str, forecast: Any, outcome: Any, rules: Mapping[str, Any]) -> float:
    if kind == "binary":
        return 1.0 - brier(kind, forecast, outcome)
    if kind == "choice":
        return 1.0 - brier(kind, forecast, outcome) / 2.0
    return numeric_reward(forecast, outcome, float(rules["center"]), float(rules["scale"]))


def score_forecast(kind: str, forecast: Any, outcome: Any, rules: Mapping[str, Any]) -> dict[str, float]:
    """All scores of one resolved, checked forecast: ``reward`` in [0, 1] (1 - Brier for binary, 1 - Brier/2
    for choice, :func:`numeric_reward`), the diagnostics (``brier``, ``log``; ``crps``, ``interval``,
    ``covered``) and ``success`` (1.0 when the reward beats the :func:`reference_forecast`'s on this outcome).

    ``rules`` is the question (or a stored prediction's payload): ``options``, ``quantiles``, ``center``,
    ``scale``."""
    reward = _reward(kind, forecast, outcome, rules)
    if kind == "choice" and "options" not in rules:
        rules = {**rules, "options": sorted(forecast)}
    success = float(reward > _reward(kind, reference_forecast(kind, rules), outcome, rules))
    scores = {"reward": reward, "success": success}
    if kind in ("binary", "choice"):
        return {**scores, "brier": brier(kind, forecast, outcome), "log": log_score(kind, forecast, outcome)}
    scores["crps"] = quantile_crps(forecast, outcome)
    levels: Sequence[str] = sorted(forecast, key=float)  # a stored forecast comes back in JSON key order
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

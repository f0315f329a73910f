"""The forecast reward is proper: over outcomes drawn from a known law, the true forecast earns the most.

Monte Carlo over seeded draws with common random numbers (every candidate is scored on the same outcomes), so
each comparison is a paired mean difference, asserted to exceed four of its standard errors. The scores are
the ones the environment, the resolver and the leaderboard use (``agentenvs.forecast_scores.score_forecast``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.forecast_scores import DEFAULT_LEVELS, level_text, quantile_crps, reference_forecast, score_forecast
from agentenvs.predictions import check_forecast

DRAWS = 12_000
LEVELS = [level_text(level) for level in DEFAULT_LEVELS]


def _rewards(kind: str, forecast: Any, outcomes: np.ndarray, rules: dict[str, Any]) -> np.ndarray:
    checked = check_forecast(kind, forecast, rules)  # what the environment would accept, canonical
    return np.array([score_forecast(kind, checked, _outcome(kind, y, rules), rules)["reward"] for y in outcomes])


def _outcome(kind: str, y: Any, rules: dict[str, Any]) -> Any:
    if kind == "binary":
        return int(y)
    if kind == "choice":
        return rules["options"][int(y)]
    return float(y)


def _losers(reward_of: Callable[[Any], np.ndarray], truth: Any, rivals: dict[str, Any]) -> dict[str, float]:
    """Each rival's mean reward deficit to the truth in standard errors of the paired difference."""
    best = reward_of(truth)
    assert best.min() >= 0.0 and best.max() <= 1.0
    out = {}
    for name, rival in rivals.items():
        diff = best - reward_of(rival)
        out[name] = float(diff.mean() / (diff.std(ddof=1) / math.sqrt(len(diff))))
    return out


def _assert_truth_wins(kind: str, truth: Any, rivals: dict[str, Any], outcomes: np.ndarray, rules: dict) -> None:
    deficits = _losers(lambda forecast: _rewards(kind, forecast, outcomes, rules), truth, rivals)
    assert all(z > 4.0 for z in deficits.values()), {name: round(z, 1) for name, z in deficits.items() if z <= 4.0}


def _quantiles(ppf: Callable[[float], float]) -> dict[str, float]:
    return {text: ppf(level) for text, level in zip(LEVELS, DEFAULT_LEVELS, strict=True)}


def _numeric_rivals(truth: dict[str, float], sigma: float, rules: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Degenerate, extreme, shifted, spread and per-level perturbed versions of the true quantiles."""
    median = truth["0.5"]
    spread = {
        f"spread x{m}": {k: median + m * (v - median) for k, v in truth.items()} for m in (0.0, 0.5, 0.8, 1.25, 2.0)
    }
    shift = {f"shift {s:+}sd": {k: v + s * sigma for k, v in truth.items()} for s in (-1.0, -0.3, 0.3, 1.0)}
    nudged = {}
    for level in LEVELS:
        for step in (-0.3, 0.3):
            moved = {**truth, level: truth[level] + step * sigma}
            if list(moved.values()) == sorted(moved.values()):
                nudged[f"{level} {step:+}sd"] = moved
    return {
        **spread,
        **shift,
        **nudged,
        "all at the center": dict.fromkeys(LEVELS, rules["center"]),
        "all at zero": dict.fromkeys(LEVELS, 0.0),
        "all at 1e300": dict.fromkeys(LEVELS, 1e300),
        "outer at -+1e9": {"0.1": -1e9, "0.5": median, "0.9": 1e9},
        "outer at -+1e300": {"0.1": -1e300, "0.5": median, "0.9": 1e300},
        "reference (success rule)": reference_forecast("numeric", rules),
    }


def _law(law: str, rng: np.random.Generator, draws: int) -> tuple[np.ndarray, dict[str, float], float]:
    """Outcomes, true quantiles and a standard deviation of a normal or a skewed (lognormal) law about 100."""
    if law == "normal":
        return rng.normal(100.0, 4.0, draws), _quantiles(NormalDist(100.0, 4.0).inv_cdf), 4.0
    mu, s = math.log(100.0), 0.15  # the median is not the mean, and the interval is not symmetric about it
    return rng.lognormal(mu, s, draws), _quantiles(lambda q: math.exp(mu + s * NormalDist().inv_cdf(q))), 100.0 * s


@pytest.mark.parametrize(("law", "scale"), [("normal", 10.0), ("normal", 3.0), ("lognormal", 10.0)])
def test_numeric_true_quantiles_maximise_the_expected_reward(law: str, scale: float) -> None:
    """The center is off the truth and scale 3 is narrower than the outcomes' spread: propriety depends on
    neither (a clipped reward, max(0, 1 - CRPS/scale), pays narrow forecasts there; see the test below)."""
    outcomes, truth, sigma = _law(law, np.random.default_rng(20261207), DRAWS)
    rules = {"center": 97.0, "scale": scale}
    _assert_truth_wins("numeric", truth, _numeric_rivals(truth, sigma, rules), outcomes, rules)


def test_the_comparison_catches_a_clipped_reward() -> None:
    """The harness above can fail: the old numeric reward, clipped at 0, loses to narrower forecasts."""
    outcomes, truth, sigma = _law("normal", np.random.default_rng(3), 3000)
    rules = {"center": 97.0, "scale": 3.0}

    def clipped(forecast: dict[str, float]) -> np.ndarray:
        return np.array([max(0.0, 1.0 - quantile_crps(forecast, y) / rules["scale"]) for y in outcomes])

    deficits = _losers(clipped, truth, _numeric_rivals(truth, sigma, rules))
    assert deficits["spread x0.8"] < -4.0


@pytest.mark.parametrize("answer", [{"0.000001": 0}, {"0.5": 100.0}, {"0.1": 95.0, "0.9": 105.0}, {}])
def test_numeric_answers_off_the_fixed_levels_cannot_be_scored(answer: dict[str, float]) -> None:
    """The one-level answer that once scored 1.0 everywhere, and every other grid but the question's."""
    with pytest.raises(InvalidArgument, match=r"(exactly the|quantiles at the) levels 0\.1, 0\.5, 0\.9"):
        check_forecast("numeric", answer, {"center": 100.0, "scale": 10.0})


def test_binary_true_probability_maximises_the_expected_reward() -> None:
    rng = np.random.default_rng(7)
    truth = 0.3
    outcomes = (rng.random(DRAWS) < truth).astype(int)
    rivals = {f"p={p:.2f}": p for p in np.linspace(0.0, 1.0, 21) if abs(p - truth) > 0.09}
    _assert_truth_wins("binary", truth, {**rivals, "p=0.5 (reference)": 0.5}, outcomes, {})
    grid = np.linspace(0.0, 1.0, 41)  # and the best of a fine grid is the truth's neighbour
    means = [_rewards("binary", float(p), outcomes, {}).mean() for p in grid]
    assert abs(grid[int(np.argmax(means))] - truth) <= 0.025 + 0.01


def test_choice_true_probabilities_maximise_the_expected_reward() -> None:
    rng = np.random.default_rng(11)
    rules = {"options": ["A", "B", "C"]}
    truth = {"A": 0.5, "B": 0.3, "C": 0.2}
    outcomes = rng.choice(3, size=DRAWS, p=list(truth.values()))
    rivals = {
        "one-hot on the mode": {"A": 1.0, "B": 0.0, "C": 0.0},
        "uniform (reference)": {"A": 1 / 3, "B": 1 / 3, "C": 1 / 3},
        "sharpened": {"A": 0.7, "B": 0.2, "C": 0.1},
        "flattened": {"A": 0.4, "B": 0.32, "C": 0.28},
        "reordered": {"A": 0.3, "B": 0.5, "C": 0.2},
        "the mode and one more": {"A": 0.5, "B": 0.5, "C": 0.0},
        "sharpened, summing to 1.005": {"A": 0.655, "B": 0.25, "C": 0.1},  # accepted, rescaled to sum to 1
    }
    _assert_truth_wins("choice", truth, rivals, outcomes, rules)


def test_crossing_quantiles_would_lose_on_every_outcome() -> None:
    """Why refusing crossed quantiles costs an honest agent nothing: for levels t1 < t2 and values a > b,
    the crossed pair loses (t2 - t1)(a - b) more pinball loss than the sorted one, whatever the outcome."""
    from agentenvs.forecast_scores import pinball

    for y in np.linspace(80.0, 120.0, 81):
        crossed = pinball(0.1, 105.0, y) + pinball(0.9, 95.0, y)
        ordered = pinball(0.1, 95.0, y) + pinball(0.9, 105.0, y)
        assert crossed - ordered == pytest.approx((0.9 - 0.1) * (105.0 - 95.0))

"""pass@k, PASS@(k,T) and bootstrap intervals against closed forms and hand-worked numbers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from agentenvs.evaluation.metrics import bootstrap_ci, estimate, k_grid, pass_at_k, pass_at_k_t, successes_within


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_pass_at_k_matches_the_closed_form_everywhere_up_to_n_20():
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_hand_worked():
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # fewer failures than k: some sample of any k succeeds
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the success rate


def test_pass_at_k_is_stable_where_the_binomials_are_huge():
    n, c, k = 2000, 7, 500
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_names_the_fix_when_k_exceeds_the_samples():
    with pytest.raises(ValueError, match="--k 4"):
        pass_at_k(2, 1, 4)


def test_pass_at_k_t_hand_worked():
    turns = [3, None, 5, 1]
    assert successes_within(turns, 2) == 1
    assert pass_at_k_t(turns, 1, 2) == pytest.approx(0.25)
    assert pass_at_k_t(turns, 1, 4) == pytest.approx(0.5)
    assert pass_at_k_t(turns, 1, 5) == pytest.approx(0.75)
    assert pass_at_k_t(turns, 2, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k_t(turns, 2, 3) == pytest.approx(1 - 1 / 6)  # c_T = 2: 1 - C(2,2)/C(4,2)
    assert pass_at_k_t(turns, 4, 1) == 1.0
    assert pass_at_k_t(turns, 4, 0) == 0.0


def test_pass_at_k_t_is_monotone_and_reaches_pass_at_k_at_the_full_budget():
    rng = np.random.default_rng(3)
    turns = [int(t) if rng.random() < 0.5 else None for t in rng.integers(1, 20, size=8)]
    c = sum(t is not None for t in turns)
    for k in (1, 2, 4, 8):
        values = [pass_at_k_t(turns, k, T) for T in range(1, 21)]
        assert values == sorted(values)
        assert values[-1] == pytest.approx(pass_at_k(8, c, k))
    for T in range(1, 21):
        by_k = [pass_at_k_t(turns, k, T) for k in range(1, 9)]
        assert by_k == sorted(by_k)


def test_k_grid():
    assert k_grid(1) == [1]
    assert k_grid(4) == [1, 2, 4]
    assert k_grid(6) == [1, 2, 4, 6]
    assert k_grid(16) == [1, 2, 4, 8, 16]
    assert k_grid(0) == []


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.1, 0.9, 0.35, 0.0, 0.72, 0.5, 0.05, 1.0, 0.66, 0.8]
    first = bootstrap_ci(values, seed="a")
    assert first == bootstrap_ci(values, seed="a")
    assert first != bootstrap_ci(values, seed="b")
    low, high = first
    assert low <= np.mean(values) <= high
    assert 0.0 <= low < high <= 1.0


def test_bootstrap_of_constant_or_single_values_is_a_point():
    assert bootstrap_ci([0.4, 0.4, 0.4]) == (0.4, 0.4)
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_bootstrap_interval_narrows_with_more_tasks_like_the_normal_approximation():
    rng = np.random.default_rng(0)
    small = rng.random(50) < 0.3
    large = rng.random(2000) < 0.3
    width_small = np.subtract(*bootstrap_ci(small)[::-1])
    width_large = np.subtract(*bootstrap_ci(large)[::-1])
    expected_large = 2 * 1.96 * math.sqrt(large.mean() * (1 - large.mean()) / large.size)
    assert width_large < width_small
    assert width_large == pytest.approx(expected_large, rel=0.15)


def test_bootstrap_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    covered = 0
    trials = 200
    for trial in range(trials):
        sample = rng.random(100) < 0.3
        low, high = bootstrap_ci(sample, seed=trial, resamples=1000)
        covered += low <= 0.3 <= high
    assert 0.88 <= covered / trials <= 0.99


def test_estimate_reports_value_interval_and_count():
    result = estimate([0.0, 1.0, 1.0, 1.0])
    assert result["value"] == 0.75
    assert result["n"] == 4
    assert result["ci95"][0] <= 0.75 <= result["ci95"][1]

"""The estimators behind every leaderboard number: pass@k, PASS@(k,T) and bootstrap intervals.

They take plain numbers (samples per task, successes, success turns), so they can be checked by hand
and reused by any scorer. Definitions are in ``docs/evaluation.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from agentenvs.seeding import derive_seed

CI_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``n`` samples of which ``c`` succeeded (Chen et al., 2021).

    ``1 - C(n-c, k) / C(n, k)`` in the numerically stable product form
    ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, which never builds the large binomials.
    """
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"pass_at_k takes integers, got n={n!r}, c={c!r}, k={k!r}")
    if n < 1 or k < 1 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs n >= 1, k >= 1 and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got n={n}; run with --k {k} or more")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def successes_within(success_turns: Sequence[int | None], max_turn: int) -> int:
    """How many episodes succeeded at or before turn ``max_turn`` (``None`` = never succeeded)."""
    return sum(1 for turn in success_turns if turn is not None and turn <= max_turn)


def pass_at_k_t(success_turns: Sequence[int | None], k: int, max_turn: int) -> float:
    """PASS@(k,T) of one task: the chance that one of k samples succeeds within T turns.

    Estimated from one run with the full turn budget as ``pass_at_k(n, c_T, k)`` with
    ``c_T = #{episodes with success_turn <= T}``; valid when the policy is not told the budget.
    """
    return pass_at_k(len(success_turns), successes_within(success_turns, max_turn), k)


def k_grid(n: int) -> list[int]:
    """The k values to report for ``n`` samples per task: 1, 2, 4, ... up to and including n."""
    if n < 1:
        return []
    grid = [1]
    while grid[-1] * 2 < n:
        grid.append(grid[-1] * 2)
    if grid[-1] != n:
        grid.append(n)
    return grid


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = CI_LEVEL,
    seed: object = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (or ``statistic``) of per-task values.

    Tasks are the resampling unit, because samples of one task are not independent. The generator
    is seeded from ``seed`` through :func:`agentenvs.seeding.derive_seed`, so an interval is
    reproducible in any process. ``statistic`` maps a (resamples, n) array to (resamples,) values.
    """
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or data.size == 0:
        raise ValueError("bootstrap_ci needs a non-empty 1-D sequence of per-task values")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if data.size == 1 or np.all(data == data[0]):
        return float(data[0]), float(data[0])
    rng = np.random.Generator(np.random.PCG64(derive_seed("bootstrap", seed)))
    draws = data[rng.integers(0, data.size, size=(resamples, data.size))]
    stats = draws.mean(axis=1) if statistic is None else statistic(draws)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def estimate(values: Sequence[float], *, seed: object = 0, resamples: int = DEFAULT_RESAMPLES) -> dict[str, object]:
    """``{"value": mean, "ci95": [low, high], "n": count}`` of per-task values."""
    data = np.asarray(values, dtype=float)
    low, high = bootstrap_ci(data, seed=seed, resamples=resamples)
    return {"value": float(data.mean()), "ci95": [low, high], "n": int(data.size)}

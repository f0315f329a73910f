"""Scripted bandit baselines: uniform random, UCB1 and Thompson sampling.

Each policy reads only what a language model sees (the observation text, parsed by
:func:`parse_observation`) and answers a plain text action. Randomness comes from a generator derived
from (policy, seed, task id, turn), so a policy is deterministic per turn whatever it played before.
"""

from __future__ import annotations

import argparse
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from agentenvs.envs.bandit.observation import BanditView, parse_observation
from agentenvs.seeding import rng_for

GAUSSIAN_PRIOR_MEAN = 0.5
GAUSSIAN_PRIOR_VAR = 1.0
GAUSSIAN_NOISE_VAR = 0.25
"""Thompson's assumed payoff noise (std 0.5): an upper bound on the panels' noise, so it explores enough."""


class BanditPolicy(ABC):
    """A scripted bandit player: ``act(observation, info) -> "pull[i]"``."""

    name: ClassVar[str] = "policy"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        view = parse_observation(observation)
        rng = rng_for("bandit-baseline", self.name, self.seed, info.get("task_id", ""), info.get("turn", view.pulls))
        return f"pull[{self.choose(view, rng)}]"

    @abstractmethod
    def choose(self, view: BanditView, rng: np.random.Generator) -> int:
        """The 0-based arm to pull."""


def _argmax_random_ties(values: np.ndarray, rng: np.random.Generator) -> int:
    best = np.flatnonzero(values == values.max())
    return int(rng.choice(best))


class RandomPolicy(BanditPolicy):
    """Pulls an arm uniformly at random: the reference that ``score`` is normalised against."""

    name: ClassVar[str] = "random"

    def choose(self, view: BanditView, rng: np.random.Generator) -> int:
        return int(rng.integers(len(view.arms)))


class UCB1Policy(BanditPolicy):
    """UCB1 (Auer et al. 2002): every arm once, then the highest mean + sqrt(2 ln t / n)."""

    name: ClassVar[str] = "ucb1"

    def choose(self, view: BanditView, rng: np.random.Generator) -> int:
        counts = np.asarray(view.counts, dtype=float)
        untried = np.flatnonzero(counts == 0)
        if untried.size:
            return int(untried[0])
        bonus = np.sqrt(2.0 * math.log(view.pulls) / counts)
        return _argmax_random_ties(np.asarray(view.means) + bonus, rng)


class ThompsonPolicy(BanditPolicy):
    """Thompson sampling: Beta(1 + wins, 1 + losses) for Bernoulli arms, a normal posterior for Gaussian ones."""

    name: ClassVar[str] = "thompson"

    def choose(self, view: BanditView, rng: np.random.Generator) -> int:
        counts = np.asarray(view.counts, dtype=float)
        means = np.asarray(view.means, dtype=float)
        if view.distribution == "bernoulli":
            wins = np.round(means * counts)
            samples = rng.beta(1.0 + wins, 1.0 + counts - wins)
        else:
            precision = 1.0 / GAUSSIAN_PRIOR_VAR + counts / GAUSSIAN_NOISE_VAR
            centre = (GAUSSIAN_PRIOR_MEAN / GAUSSIAN_PRIOR_VAR + counts * means / GAUSSIAN_NOISE_VAR) / precision
            samples = rng.normal(centre, 1.0 / np.sqrt(precision))
        return _argmax_random_ties(samples, rng)


BASELINES: dict[str, type[BanditPolicy]] = {cls.name: cls for cls in (RandomPolicy, UCB1Policy, ThompsonPolicy)}
"""Baseline name to policy class."""


def play_episode(env: Any, policy: BanditPolicy, *, task_id: str, split: str = "test", seed: int = 0) -> dict[str, Any]:
    """One episode of ``policy`` on ``env``; the final info's metrics plus return, score and success."""
    observation, info = env.reset(seed=seed, options={"task_id": task_id, "split": split})
    total, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, info = env.step(policy.act(observation, info))
        total += reward
        done = terminated or truncated
    return {**info["metrics"], "return": total, "score": info["score"], "success": info["success"]}


def baseline_table(split: str = "test", seeds: tuple[int, ...] = (0, 1, 2)) -> dict[str, dict[str, dict[str, float]]]:
    """Per baseline and task type (and ``all``): mean expected regret, score, success and best-arm rate."""
    import agentenvs

    env = agentenvs.make("bandit")
    tasks = env.tasks(split)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, cls in BASELINES.items():
        rows: dict[str, list[dict[str, Any]]] = {}
        for seed in seeds:
            policy = cls(seed=seed)
            for task in tasks:
                outcome = play_episode(env, policy, task_id=task["task_id"], split=split, seed=seed)
                rows.setdefault(task["task_type"], []).append(outcome)
                rows.setdefault("all", []).append(outcome)
        table[name] = {
            kind: {
                key: float(np.mean([float(row[key]) for row in outcomes]))
                for key in ("expected_regret", "score", "success", "best_arm_rate")
            }
            for kind, outcomes in rows.items()
        }
    env.close()
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.envs.bandit.baselines",
        description="Play random, UCB1 and Thompson sampling on a bandit panel and print their mean regret and score.",
    )
    parser.add_argument("--split", default="test", help="panel split (default: test)")
    parser.add_argument("--seeds", type=int, default=3, help="episode seeds per task (default: 3)")
    args = parser.parse_args(argv)
    table = baseline_table(args.split, tuple(range(args.seeds)))
    print("| policy | task type | expected regret | score | success | best-arm rate |")
    print("|---|---|---:|---:|---:|---:|")
    for name, kinds in table.items():
        for kind in [kind for kind in kinds if kind != "all"] + ["all"]:
            row = kinds[kind]
            cells = [f"{row['expected_regret']:.2f}", f"{row['score']:.3f}", f"{row['success']:.2f}"]
            print(f"| {name} | {kind} | {' | '.join(cells)} | {row['best_arm_rate']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

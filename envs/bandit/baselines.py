"""Scripted bandit baselines: uniform random, UCB1 and Thompson sampling.

Each policy is a rollout ``Policy`` (docs/rollout.md), played by the same driver as a model, and
reads only what a language model sees (the observation text, parsed by :func:`parse_observation`).
Randomness comes from a generator derived from (policy, seed, task id, turn), so a policy is
deterministic per turn whatever it played before.
"""

from __future__ import annotations

import argparse
import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from agentenvs.envs.bandit.observation import BanditView, parse_observation
from agentenvs.rollout.policy import Actor, Decision, EpisodeContext, Policy, whole_response_action
from agentenvs.seeding import rng_for

GAUSSIAN_PRIOR_MEAN = 0.5
GAUSSIAN_PRIOR_VAR = 1.0
GAUSSIAN_NOISE_VAR = 0.25
"""Thompson's assumed payoff noise (std 0.5): an upper bound on the panels' noise, so it explores enough."""


class BanditPolicy(Policy):
    """A scripted bandit player, a rollout ``Policy`` like any other: each turn it answers ``pull[i]``."""

    name: ClassVar[str] = "policy"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "seed": self.seed}

    def begin(self, context: EpisodeContext) -> Actor:
        return _BanditActor(self, context.task_id)

    @abstractmethod
    def choose(self, view: BanditView, rng: np.random.Generator) -> int:
        """The 0-based arm to pull."""


class _BanditActor(Actor):
    def __init__(self, policy: BanditPolicy, task_id: str):
        self.policy = policy
        self.task_id = task_id

    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        view = parse_observation(observation)
        policy = self.policy
        rng = rng_for("bandit-baseline", policy.name, policy.seed, self.task_id, info.get("turn", view.pulls))
        action = f"pull[{policy.choose(view, rng)}]"
        return Decision(action, whole_response_action(action))


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


def play_episodes(policy: BanditPolicy, tasks: list[tuple[str, int]], split: str = "test") -> list[dict[str, Any]]:
    """One episode of ``policy`` per ``(task id, seed)`` through the rollout driver: each episode's final
    metrics plus its return, score and success, in the order given."""
    from agentenvs.rollout.driver import EpisodeSpec, RolloutConfig, run_rollouts

    specs = [
        EpisodeSpec(task_id, split, seed, f"bandit/{split}/{task_id}/{seed}", f"bandit/{split}/{task_id}/{seed}/0", 0)
        for task_id, seed in tasks
    ]
    records = run_rollouts("bandit", policy, episodes=specs, config=RolloutConfig(concurrency=1, progress=False))
    return [
        {**r.steps[-1].info["metrics"], "return": r.return_, "score": r.score, "success": r.success} for r in records
    ]


def play_episode(policy: BanditPolicy, *, task_id: str, split: str = "test", seed: int = 0) -> dict[str, Any]:
    """One episode of ``policy`` (see :func:`play_episodes`)."""
    return play_episodes(policy, [(task_id, seed)], split)[0]


def baseline_table(split: str = "test", seeds: tuple[int, ...] = (0, 1, 2)) -> dict[str, dict[str, dict[str, float]]]:
    """Per baseline and task type (and ``all``): mean expected regret, score, success and best-arm rate."""
    import agentenvs

    tasks = agentenvs.make("bandit").tasks(split)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, cls in BASELINES.items():
        rows: dict[str, list[dict[str, Any]]] = {}
        for seed in seeds:
            outcomes = play_episodes(cls(seed=seed), [(task["task_id"], seed) for task in tasks], split)
            for task, outcome in zip(tasks, outcomes, strict=True):
                rows.setdefault(task["task_type"], []).append(outcome)
                rows.setdefault("all", []).append(outcome)
        table[name] = {
            kind: {
                key: float(np.mean([float(row[key]) for row in outcomes]))
                for key in ("expected_regret", "score", "success", "best_arm_rate")
            }
            for kind, outcomes in rows.items()
        }
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

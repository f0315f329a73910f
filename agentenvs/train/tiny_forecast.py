"""A tiny forecasting policy that learns from backfilled rewards: the CPU test of forecast replay training.

A language model from scratch cannot learn to read news and write calibrated probabilities within a CPU
test's minute, so the learning test (tests/train/test_forecast_replay.py) trains this policy family
instead, through the same machinery an LLM run uses: episodes played by ``run_rollouts`` in ``pending``
mode into a prediction store, resolved later by ``agentenvs forecast advance``, read back with the reward
backfilled by :class:`~agentenvs.train.replay.ReplaySource`, and given GRPO advantages by
``agentenvs.train.advantages``. What is learned is real and can fail: the policy searches the
news like an agent would (event ratings, recent match results, the latest close of a series), turns them
into one evidence number ``f`` per question (a log-odds, or the close's distance to a threshold), and
forecasts ``sigmoid(b[type] + w[type] * f + sigma * noise)``. At the start ``b = w = 0`` (always 0.5); the
gradient (REINFORCE on the Gaussian in logit space) must find how much to trust each kind of evidence
from rewards alone.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from agentenvs.actions import ExtractedAction
from agentenvs.rollout.policy import Actor, Decision, EpisodeContext, Policy
from agentenvs.seeding import rng_for

TYPES = ("event", "match", "threshold")
EVENT = re.compile(r"Will the (.+) scheduled for tick \d+ take place\?")
MATCH = re.compile(r"Will (\w+) beat (\w+) in their match")
COUNT = re.compile(r"^(\d+) items match")
TITLE = re.compile(r"^\[[^\]]+\] tick \d+: (\w+) beats (\w+)$", re.M)
THRESHOLD = re.compile(r"Will the (.+) close above ([0-9.]+) at tick")
CLOSE = re.compile(r"^\[[^\]]+\] tick \d+: .+ closes at ([0-9.]+)$", re.M)
CLOSE_SCALE = 3.0
"""Distance to the threshold is measured in units of this (a typical few-tick move)."""


def question_type(observation: str) -> tuple[str, tuple[str, ...]]:
    """The question's type and the names its searches need, from the first observation."""
    if m := EVENT.search(observation):
        return "event", (m.group(1),)
    if m := MATCH.search(observation):
        return "match", (m.group(1), m.group(2))
    if m := THRESHOLD.search(observation):
        return "threshold", (m.group(1), m.group(2))
    return "threshold", ()


def searches(kind: str, names: tuple[str, ...]) -> list[str]:
    """The tool calls the policy makes before answering."""
    if kind == "event":
        return [f"search[{names[0]} rates]", f"search[{names[0]} unlikely]"]
    if kind == "match":
        return [f"search[{names[0]} beats]", f"search[{names[1]} beats]"]
    return [f"search[{names[0]} closes]"] if names else []


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def evidence(kind: str, names: tuple[str, ...], results: list[str]) -> float:
    """The evidence number of a question from the search results (0 when there is none)."""
    if kind == "event":
        total, unlikely = (int(m.group(1)) if (m := COUNT.search(r)) else 0 for r in results)
        return _logit((total - unlikely + 1) / (total + 2))
    if kind == "match":
        rates = []
        for name, result in zip(names, results, strict=True):
            games = TITLE.findall(result)
            wins = sum(winner == name for winner, _ in games)
            rates.append(_logit((wins + 1) / (len(games) + 2)))
        return rates[0] - rates[1]
    closes = CLOSE.findall(results[0]) if names and results else []
    return (float(closes[0]) - float(names[1])) / CLOSE_SCALE if closes else 0.0


class ForecasterPolicy(Policy):
    """``sigmoid(b[type] + w[type] * evidence + sigma * noise)``; ``theta`` holds b and w per type."""

    name = "tiny-forecaster"

    def __init__(self, sigma: float = 0.6):
        self.theta = np.zeros((len(TYPES), 2))
        self.sigma = sigma

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "sigma": self.sigma, "theta": self.theta.round(6).tolist()}

    def mean(self, kind: str, f: float) -> float:
        b, w = self.theta[TYPES.index(kind)]
        return float(b + w * f)

    def begin(self, context: EpisodeContext) -> Actor:
        return _ForecastActor(self, rng_for("tiny-forecaster", context.policy_seed))


class _ForecastActor(Actor):
    def __init__(self, policy: ForecasterPolicy, rng: np.random.Generator):
        self.policy, self.rng, self.seen = policy, rng, []

    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        self.seen.append(observation)
        kind, names = question_type(self.seen[0])
        plan = searches(kind, names)
        if len(self.seen) <= len(plan):
            action = plan[len(self.seen) - 1]
            return Decision(action, _span(action))
        mu = self.policy.mean(kind, evidence(kind, names, self.seen[1:]))
        z = mu + self.policy.sigma * float(self.rng.standard_normal()) if self.policy.sigma > 0 else mu
        response = f"<answer>{1.0 / (1.0 + math.exp(-max(-9.0, min(9.0, z)))):.6f}</answer>"
        return Decision(response, _span(response))


def _span(text: str) -> ExtractedAction:
    return ExtractedAction(text, 0, len(text))


def score_gradient(policy: ForecasterPolicy, record: Any, advantage: float) -> np.ndarray:
    """REINFORCE gradient of one replayed episode: ``advantage * d log N(z; mu, sigma) / d theta``."""
    observations = [step.observation for step in record.steps]
    kind, names = question_type(observations[0])
    f = evidence(kind, names, observations[1 : 1 + len(searches(kind, names))])
    p = float(re.search(r"<answer>([0-9.]+)</answer>", record.steps[-1].response).group(1))
    z = _logit(min(1 - 1e-6, max(1e-6, p)))
    grad = np.zeros_like(policy.theta)
    step = advantage * (z - policy.mean(kind, f)) / policy.sigma**2
    grad[TYPES.index(kind)] = (step, step * f)
    return grad

"""K-armed bandits (Bernoulli and Gaussian) played in text over a fixed horizon of pulls.

Rules, success and score are documented in ``docs/bandit.md``. In short: every turn is one pull
(an action that names no arm wastes it, paying 0); the reward is the sampled payoff; the episode
terminates when the horizon is used up; ``success`` means the best arm was chosen in a strict
majority of the last 20% of the pulls; ``score`` (on every step) is 1 minus the expected regret so
far normalised by the expected regret of uniform random play over as many pulls (clipped to [0, 1]);
``anchor`` is the task with the pulls per arm and the pulls left (see ``docs/bandit.md``).

The payoff noise of turn t is drawn at reset, before any choice, from the episode's generator
(common random numbers): the same task and seed give the same noise whatever arm is pulled, so a
better arm pays at least as much as a worse one on Bernoulli tasks turn by turn, and in expectation
on every task. Gaussian noise is clipped symmetrically at 3 standard deviations, which keeps each
arm's mean exact and the reward bounded.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agentenvs import panels
from agentenvs.actions import ExtractedAction
from agentenvs.core import TextEnv, Transition, ascii_safe
from agentenvs.envs.bandit import SPEC
from agentenvs.envs.bandit.grammar import find_action, parse_action
from agentenvs.envs.bandit.observation import arm_label, render_header, render_status
from agentenvs.info import text_hash

SUCCESS_WINDOW = 0.2
"""Success looks at the last 20% of the horizon (rounded up)."""
NOISE_CLIP = 3.0


def success_window(horizon: int) -> int:
    return max(1, math.ceil(SUCCESS_WINDOW * horizon))


class BanditEnv(TextEnv):
    """A K-armed bandit over ``horizon`` pulls; ``max_turns`` is the task's horizon."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    """The longest horizon in the panels (10 arms); each reset sets ``max_turns`` to its task's horizon."""
    reward_range_: ClassVar[tuple[float, float]] = (-1.0, 2.0)
    """Bernoulli pays 0 or 1; Gaussian pays a mean in [0.05, 0.95] plus noise of at most 3 x 0.3."""
    action_format: ClassVar[str] = (
        "pull[i] with a 0-based arm index, or the arm's name (case-insensitive), optionally inside <action>...</action>"
    )
    instructions: ClassVar[str] = (
        "You are playing a multi-armed bandit. Each turn you pull one arm and receive its random payoff; the arms "
        "differ in their hidden average payoff. Maximise your total payoff over all pulls: try arms to learn which "
        "pays best, then keep pulling the best one. The observation shows, per arm, how often you pulled it and its "
        "mean payoff so far. Answer with exactly one action inside <action></action>, for example "
        "<action>pull[2]</action> or <action>red</action>. An action that names no arm wastes the pull (payoff 0)."
    )
    has_admissible_actions: ClassVar[bool] = True
    has_privileged: ClassVar[bool] = True
    names_admissible: ClassVar[bool] = False
    """Whether ``admissible_actions`` also lists the arms' names (the grammar takes both forms either way)."""

    # ------------------------------------------------------------------ hooks

    def turn_limit(self, task: dict[str, Any], requested: int | None) -> int:
        """The task's horizon, or fewer turns when the caller asks for fewer."""
        horizon = int(task["horizon"])
        return min(requested or horizon, horizon)

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        self._arms: list[str] = list(task["arms"])
        self._means = np.asarray(task["means"], dtype=float)
        self._stds = np.asarray(task.get("stds", [0.0] * len(self._arms)), dtype=float)
        self._best = int(np.argmax(self._means))
        self._random_gap = float(self._means[self._best] - self._means.mean())
        """Uniform random play's expected regret per pull (the scale of ``score``)."""
        horizon = int(task["horizon"])
        self._uniform = rng.random(horizon)
        self._normal = np.clip(rng.standard_normal(horizon), -NOISE_CLIP, NOISE_CLIP)
        self._counts = [0] * len(self._arms)
        self._sums = [0.0] * len(self._arms)
        self._choices: list[int | None] = []
        self._regret = 0.0
        self._invalid = 0
        self._header = render_header(task)
        self._admissible = [f"pull[{i}]" for i in range(len(self._arms))]
        if self.names_admissible:
            self._admissible += self._arms
        observation = self._observation("No pulls yet.")
        return observation, self._info(step_regret=0.0)

    def _step(self, action: str) -> Transition:
        turn = len(self._choices)
        arm = parse_action(action, self._arms)
        if arm is not None and 0 <= arm < len(self._arms):
            reward = self.payoff(arm, turn)
            self._counts[arm] += 1
            self._sums[arm] += reward
            step_regret = float(self._means[self._best] - self._means[arm])
            last = f"Last pull: {arm_label(arm, self._arms[arm])} paid {reward:.3f}."
        else:
            last = f"Your action '{ascii_safe(action)}' {self._why_invalid(arm)}; the pull was wasted (payoff 0)."
            reward, arm = 0.0, None
            step_regret = float(self._means[self._best])
            self._invalid += 1
        self._choices.append(arm)
        self._regret += step_regret
        terminated = len(self._choices) >= len(self._uniform)
        info = self._info(step_regret=step_regret, valid=arm is not None)
        if terminated or len(self._choices) >= self.max_turns:
            info["metrics"]["window_best_arm_rate"] = self.window_best_arm_rate()
        if terminated:
            info["success"] = self.window_best_arm_rate() > 0.5
        return Transition(self._observation(last), reward, terminated, info)

    def extract_action(self, response: str) -> ExtractedAction | None:
        """``pull[...]`` or an arm name in a full response (see :func:`grammar.find_action`)."""
        return find_action(response, self._arms if self.task is not None else ())

    def _describe(self) -> dict[str, Any]:
        manifest = panels.read_manifest(self.name)
        return {
            "task_types": manifest.get("task_types", []),
            "horizons": manifest.get("horizons", {}),
            "success": "the best arm was chosen in a strict majority of the last 20% of the horizon's pulls",
            "score": "1 - expected regret / expected regret of uniform random play, clipped to [0, 1]",
            "metrics": ["expected_regret", "step_regret", "best_arm_rate", "invalid_actions", "window_best_arm_rate"],
        }

    # ------------------------------------------------------------------ the bandit

    def payoff(self, arm: int, turn: int) -> float:
        """The payoff arm ``arm`` gives on turn ``turn`` (0-based) of this episode."""
        if self.task["distribution"] == "bernoulli":
            return float(self._uniform[turn] < self._means[arm])
        return float(self._means[arm] + self._stds[arm] * self._normal[turn])

    def score(self) -> float:
        """1 - regret / regret of uniform random play over the same number of pulls, in [0, 1];
        0 before the first pull (no progress yet)."""
        if not self._choices:
            return 0.0
        random_regret = len(self._choices) * self._random_gap
        if random_regret <= 0:
            return 1.0
        return float(min(1.0, max(0.0, 1.0 - self._regret / random_regret)))

    def window_best_arm_rate(self) -> float:
        """The share of the last 20% of the horizon's pulls that chose the best arm."""
        window = self._choices[-success_window(len(self._uniform)) :]
        return sum(choice == self._best for choice in window) / len(window) if window else 0.0

    def anchor(self) -> str:
        """The state a GiGPO step group shares: the task, the pulls of each arm and the pulls left.
        The payoffs seen are left out: with the noise drawn per turn they depend on the order of the
        pulls, not on the allocation the agent chose."""
        pulls_left = len(self._uniform) - len(self._choices)
        return text_hash(f"{self.task['task_id']}\n{self._counts}\n{pulls_left}")

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Arms 0 and 1 pulled in either order reach one state (for the conformance suite)."""
        if len(self._arms) < 2 or self.max_turns - self.turn < 2:
            return None
        return ["pull[0]", "pull[1]"], ["pull[1]", "pull[0]"]

    def _why_invalid(self, arm: int | None) -> str:
        if arm is None:
            return f"is not a pull: answer pull[i] with i from 0 to {len(self._arms) - 1}, or an arm's name"
        return f"names no arm: there are {len(self._arms)} arms, pull[0] to pull[{len(self._arms) - 1}]"

    def _observation(self, last: str) -> str:
        pulls_left = len(self._uniform) - len(self._choices)
        status = render_status(self.task, self._counts, self._sums, pulls_left, sum(self._sums), last)
        return f"{self._header}\n\n{status}"

    def _info(self, *, step_regret: float, valid: bool | None = None) -> dict[str, Any]:
        pulls = len(self._choices)
        info: dict[str, Any] = {
            "admissible_actions": list(self._admissible),
            "anchor": self.anchor(),
            "score": self.score(),
            "metrics": {
                "expected_regret": self._regret,
                "step_regret": step_regret,
                "best_arm_rate": (self._counts[self._best] / pulls) if pulls else 0.0,
                "invalid_actions": self._invalid,
            },
        }
        if self.privileged:
            info["privileged"] = {"arm_means": self._means.tolist(), "best_arm": self._best}
            if "stds" in self.task:
                info["privileged"]["arm_stds"] = self._stds.tolist()
        if valid is not None:
            info["action_valid"] = valid
        return info

"""Policies without a model: a seeded random choice of admissible actions, and the privileged expert."""

from __future__ import annotations

from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.policy import Actor, Decision, EpisodeContext, Policy, whole_response_action
from agentenvs.seeding import rng_for


class RandomPolicy(Policy):
    """Picks uniformly among ``info['admissible_actions']``; the same episode seed gives the same choices."""

    name = "random"
    blocking = False

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "seed": self.seed}

    def begin(self, context: EpisodeContext) -> Actor:
        if not context.description.get("capabilities", {}).get("admissible_actions", True):
            raise InvalidArgument(
                f"{context.env} does not list admissible actions, so the random policy has nothing to choose from; "
                "use an LLM policy (smollm2, openai:URL, hf:PATH) instead"
            )
        return _RandomActor(self.seed, context)


class _RandomActor(Actor):
    def __init__(self, seed: int, context: EpisodeContext):
        self.seed = seed
        self.context = context

    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        choices = info.get("admissible_actions") or []
        if not choices:
            return Decision("", None)
        rng = rng_for("random-policy", self.seed, self.context.policy_seed, info.get("turn", 0))
        action = str(choices[int(rng.integers(len(choices)))])
        return Decision(action, whole_response_action(action))


EXPERT_KEYS = ("expert_action", "expert_plan", "best_arm")
"""The privileged keys the expert reads, in order: the next action; the remaining plan from the current
state (ALFWorld, ScienceWorld); the index of the best admissible action (the bandit's oracle arm)."""


class ExpertPolicy(Policy):
    """Follows the environment's privileged plan; needs an environment made with ``privileged=True``."""

    name = "expert"
    needs_privileged = True
    blocking = False

    def __init__(self, baseline: str | None = None):
        self.baseline = baseline
        """Play ``info['privileged']['baseline_actions'][baseline]`` instead (reference forecasters)."""
        if baseline:
            self.name = f"baseline-{baseline}"

    def begin(self, context: EpisodeContext) -> Actor:
        if not context.description.get("capabilities", {}).get("privileged", False):
            raise InvalidArgument(f"{context.env} publishes no privileged plan, so it has no expert policy")
        return _ExpertActor(self.baseline)


class _ExpertActor(Actor):
    def __init__(self, baseline: str | None = None) -> None:
        self.plan: list[str] = []
        self.baseline = baseline

    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        privileged = info.get("privileged")
        if privileged is None and self.plan:  # a plan published once, at reset, is followed to its end
            action = self.plan.pop(0)
            return Decision(action, whole_response_action(action))
        if privileged is None:
            raise InvalidArgument(
                "the expert policy sees no info['privileged']; make the environment with privileged=True "
                "(the driver does this for policies with needs_privileged)"
            )
        action = self._next_action(privileged, info)
        return Decision(action, whole_response_action(action))

    def _next_action(self, privileged: dict[str, Any], info: dict[str, Any]) -> str:
        if self.baseline:
            actions = privileged.get("baseline_actions") or {}
            if self.baseline not in actions:
                raise InvalidArgument(f"this environment offers the baselines {sorted(actions)}, not {self.baseline!r}")
            return str(actions[self.baseline])
        if isinstance(privileged.get("expert_action"), str):
            return privileged["expert_action"]
        if isinstance(privileged.get("expert_plan"), list):
            self.plan = [str(a) for a in privileged["expert_plan"]]
        if self.plan:
            return self.plan.pop(0)
        if isinstance(privileged.get("best_arm"), int) and info.get("admissible_actions"):
            return str(info["admissible_actions"][privileged["best_arm"]])
        raise InvalidArgument(
            f"info['privileged'] holds none of {EXPERT_KEYS} (it has {sorted(privileged)}); "
            "the environment must publish its expert plan under one of these keys"
        )

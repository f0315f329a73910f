"""``bandit-tiny``: the bandit engine with a short prompt and a panel a from-scratch model can learn.

The real bandit (``envs/bandit``) renders ~470 characters of rules and history per turn, which a
character-level model must read token by token; on two CPU cores that alone would eat the test
budget. This environment keeps the bandit's engine (payoffs with common random numbers, the action
grammar, regret, score and success) and changes two things:

- the observation is one line, ``Arms: pull[0] gold | pull[1] teal`` (plus the last pull on later turns);
- the panel is contextual: two arms, one of them always named ``gold`` and paying 0.8, the other
  paying 0.2, in a random position. A policy that names ``gold`` (or finds its index) always pulls the
  better arm; one that picks at random gets 0.5 on average. The admissible actions list both forms
  (``pull[0]``, ``pull[1]``, ``gold``, ``teal``), so a model warmed up on the random player writes both,
  and the reward alone must teach it which pays: that is the signal the learning test measures.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from agentenvs.envs.bandit.env import BanditEnv
from agentenvs.envs.bandit.observation import arm_label
from agentenvs.seeding import rng_for

NAME = "bandit-tiny"
GOOD_ARM = "gold"
GOOD_MEAN = 0.8
BAD_MEAN = 0.2
OTHER_ARMS = ("red", "blue", "green", "teal", "coral", "navy", "plum", "rust", "sky", "jade", "olive", "amber")
SPLIT_SIZES = {"train": 256, "test": 64}


def make_task(split: str, index: int, horizon: int = 1) -> dict[str, Any]:
    """Task ``index`` of ``split``: ``gold`` and one other arm, order drawn from the task's generator."""
    rng = rng_for(NAME, split, index)
    other = str(OTHER_ARMS[int(rng.integers(len(OTHER_ARMS)))])
    gold_first = bool(rng.integers(2))
    arms = [GOOD_ARM, other] if gold_first else [other, GOOD_ARM]
    means = [GOOD_MEAN, BAD_MEAN] if gold_first else [BAD_MEAN, GOOD_MEAN]
    return {
        "task_id": f"gold-{split}-{index:03d}",
        "task_type": "gold-k2",
        "distribution": "bernoulli",
        "arms": arms,
        "means": means,
        "horizon": horizon,
    }


@lru_cache(maxsize=8)
def panel(horizon: int) -> dict[str, tuple[dict[str, Any], ...]]:
    """Every split's tasks for ``horizon`` (built once per process; environments are made per rollout)."""
    return {split: tuple(make_task(split, i, horizon) for i in range(size)) for split, size in SPLIT_SIZES.items()}


class TinyBandit(BanditEnv):
    """The bandit with a one-line observation and the contextual ``gold`` panel (``horizon`` pulls)."""

    name: ClassVar[str] = NAME
    version: ClassVar[str] = "2"
    default_split: ClassVar[str] = "test"
    instructions: ClassVar[str] = "Pull the arm that pays most. Answer pull[i] or the arm's name."
    names_admissible: ClassVar[bool] = True

    def __init__(self, *, horizon: int = 1, **kwargs: Any):
        super().__init__(**kwargs)
        self.horizon = int(horizon)
        self._panel = panel(self.horizon)

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        return self._panel.get(split, ())

    def splits(self) -> dict[str, int]:
        return {split: len(tasks) for split, tasks in self._panel.items()}

    def _observation(self, last: str) -> str:
        arms = "Arms: " + " | ".join(arm_label(i, name) for i, name in enumerate(self._arms))
        return arms if not self._choices else f"{arms}\n{last}"

    def _describe(self) -> dict[str, Any]:
        return {"task_types": ["gold-k2"], "horizon": self.horizon, "good_arm": GOOD_ARM}

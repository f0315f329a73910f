"""A small TextEnv whose engine fails on command, for the driver's failure-cause tests.

Task ``fail-at-N`` raises from ``step`` on turn N (an engine crash); ``steady`` never fails. The
action ``good`` pays 1; anything else is invalid. Served with ``--env flaky=rollout_envs_for_tests:FlakyEnv``
and this folder on ``PYTHONPATH``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TextEnv, Transition

TASKS = ({"task_id": "steady", "fail_at": 0}, {"task_id": "fail-at-2", "fail_at": 2})


class FlakyEnv(TextEnv):
    name: ClassVar[str] = "flaky"
    version: ClassVar[str] = "1"
    default_max_turns: ClassVar[int] = 4
    has_admissible_actions: ClassVar[bool] = True
    instructions: ClassVar[str] = "Answer good."

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        return TASKS if split == "test" else ()

    def splits(self) -> dict[str, int]:
        return {"test": len(TASKS)}

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        return "Say good.", {"admissible_actions": ["good", "bad"]}

    def _step(self, action: str) -> Transition:
        if self.task["fail_at"] and self.turn + 1 == self.task["fail_at"]:
            raise RuntimeError("the engine crashed")
        valid = action == "good"
        done = self.turn + 1 >= 3
        info: dict[str, Any] = {"action_valid": valid, "admissible_actions": ["good", "bad"]}
        if done:
            info |= {"success": True, "score": 1.0}
        return Transition("Say good again." if not done else "Well done.", float(valid), done, info)

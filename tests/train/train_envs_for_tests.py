"""A three-turn environment whose dense reward any text earns a little of, for update tests on real records.

An untrained model writes gibberish, so on a real benchmark every reward is 0 and every advantage too.
Here a turn pays the share of lower-case letters in the action (the response's last line, so responses
with a line break have reasoning tokens outside the action), so rollouts of a from-scratch model give
varied advantages and a mix of reasoning and action tokens; the anchor is the turn (group members share
their states turn by turn, which gives GiGPO step groups). Registered by the trainer's ``env.entry_point``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TextEnv, Transition

TASKS = tuple({"task_id": f"letters-{i}"} for i in range(8))


class LettersEnv(TextEnv):
    name: ClassVar[str] = "letters"
    version: ClassVar[str] = "1"
    default_max_turns: ClassVar[int] = 3
    action_format: ClassVar[str] = "the last line of the response"
    instructions: ClassVar[str] = "Write lower-case letters."

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        return TASKS if split in ("train", "test") else ()

    def splits(self) -> dict[str, int]:
        return {"train": len(TASKS), "test": len(TASKS)}

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        return "Write letters.", {"anchor": "turn-0"}

    def _step(self, action: str) -> Transition:
        reward = sum(c.islower() for c in action) / max(len(action), 1)
        done = self.turn + 1 >= self.default_max_turns
        info: dict[str, Any] = {"action_valid": bool(action), "anchor": f"turn-{self.turn + 1}"}
        if done:
            info |= {"success": False, "score": 0.0}
        return Transition("Again.", reward, done, info)

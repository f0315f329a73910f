"""``TextWorldEnv``: TextWorld's generated games on its own Z-machine engine, with the game's score.

Each panel row names a game (family, level, kind, seed) that ``games.materialise`` builds into the
cache and checks. The engine is TextWorld's (``textworld.start`` with ``EnvInfos``, what
``textworld.gym`` wraps), asked for the admissible commands, score, win and loss, the facts (the
anchor hashes them with the points: a quest step once rewarded is not rewarded again, even where the
facts return to what they were) and, for privileged runs, the planner's commands from the current
state (beside the generator's walkthrough, which is only a plan from the start).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TextEnv, Transition, ascii_safe
from agentenvs.envs.alfworld.engine import ENGINE_LOCK
from agentenvs.envs.textworld import SPEC
from agentenvs.envs.textworld.games import FAMILIES, materialise
from agentenvs.info import text_hash

MAX_ACTION_CHARS = 190
"""TextWorld's parser reads a command line; a longer action is not a command."""

INSTRUCTIONS = """You are playing a TextWorld text adventure. Each turn you read what happens and type one command.
Commands look like: go north, open door, take coin, take apple from table, put apple on table,
insert key into box, unlock door with key, examine cookbook, eat meal, look, inventory.
The first observation says what to do (in some games only the score tells you that you are on the right track).
The list of admissible commands is given when available. You have at most {max_turns} turns.
Write your reasoning if you like, then the command inside <action>...</action>, e.g. <action>go north</action>."""


def engine_command(action: str) -> str:
    """The action as one line of printable ASCII: the Z-machine reads a line, and a NUL or other
    control character sent through jericho makes it wait for input forever."""
    return " ".join("".join(c if " " <= c <= "~" else " " for c in action).split())


class TextWorldEnv(TextEnv):
    """TextWorld games: ``score`` is points / max points each step; ``success`` on a win."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    default_split: ClassVar[str] = "demo"
    max_action_chars: ClassVar[int] = MAX_ACTION_CHARS
    action_format: ClassVar[str] = "one TextWorld command inside <action>...</action> (e.g. 'take coin')"
    has_admissible_actions: ClassVar[bool] = True
    has_privileged: ClassVar[bool] = True

    def __init__(self, *, max_turns: int | None = None, privileged: bool = False, render_mode: str | None = None):
        super().__init__(max_turns=max_turns, privileged=privileged, render_mode=render_mode)
        self.instructions = INSTRUCTIONS.replace("{max_turns}", str(self.max_turns))
        self._engine: Any = None
        self._loaded: str | None = None
        self._admissible: list[str] = []
        self._points = 0
        self._invalid = 0

    def turn_limit(self, task: dict[str, Any], requested: int | None) -> int:
        """The caller's ``max_turns``, else the family's limit (the row carries it)."""
        return requested or int(task.get("max_turns") or self.default_max_turns)

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        path = str(materialise(task))
        if path != self._loaded:
            self._close_engine()
            import textworld

            infos = textworld.EnvInfos(
                admissible_commands=True, score=True, max_score=True, won=True, lost=True, facts=True,
                policy_commands=self.privileged,
            )  # fmt: skip
            with ENGINE_LOCK, warnings.catch_warnings():
                # jericho warns that it cannot detect score changes in TextWorld's games; TextWorld tracks them
                warnings.simplefilter("ignore", category=UserWarning)
                self._engine = textworld.start(path, request_infos=infos)
            self._loaded = path
        with ENGINE_LOCK:  # TextWorld's parsers are shared by every game in the process, not thread-safe
            state = self._engine.reset()
        self._points, self._invalid = 0, 0
        return self._observe(state, None)

    def _step(self, action: str) -> Transition:
        command = engine_command(action)
        valid = command.lower() in self._admissible
        with ENGINE_LOCK:
            state, points, done = self._engine.step(command)
        gained = int(points) - self._points
        self._points = int(points)
        observation, info = self._observe(state, valid)
        if state["won"]:
            info["success"] = True
        return Transition(observation, gained / self._max_score(state), terminated=bool(done), info=info)

    def _observe(self, state: Any, action_valid: bool | None) -> tuple[str, dict[str, Any]]:
        if action_valid is False:
            self._invalid += 1
        self._admissible = [command.lower() for command in state["admissible_commands"]]
        facts = sorted(str(fact) for fact in state["facts"])
        info: dict[str, Any] = {
            "admissible_actions": list(self._admissible),
            "anchor": text_hash("\n".join([self._task["task_id"], f"points {self._points}", *facts])),
            "score": self._points / self._max_score(state),
            "raw_score": float(self._points),
            "metrics": {"invalid_actions": float(self._invalid), "points": float(self._points)},
        }
        if action_valid is not None:
            info["action_valid"] = action_valid
        if self.privileged:
            info["privileged"] = {
                "expert_plan": list(state.get("policy_commands") or []),
                "walkthrough": list(self._task["walkthrough"]),
            }
        return ascii_safe(state.feedback, limit=1 << 20), info

    @staticmethod
    def _max_score(state: Any) -> float:
        return float(state["max_score"]) or 1.0

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Two things taken or opened in either order: one state by two paths (for the conformance
        suite's anchor check). The walkthrough's last command (it wins the game) is left out, and the
        two commands name different objects; None where no two such commands are admissible."""
        if self.max_turns - self.turn < 2:
            return None
        winning = (self._task.get("walkthrough") or [""])[-1].lower()
        movers, objects = [], set()
        for command in self._admissible:
            thing = command.split(" from ")[0].split(" ", 1)[-1]
            if command.startswith(("take ", "open ")) and command != winning and thing not in objects:
                movers.append(command)
                objects.add(thing)
        if len(movers) < 2:
            return None
        first, second = movers[:2]
        return [first, second], [second, first]

    def _describe(self) -> dict[str, Any]:
        return {
            "families": {name: sorted(family["levels"]) for name, family in FAMILIES.items()},
            "engine": "textworld 1.7.0 (its generator and Z-machine engine)",
        }

    def _close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._engine, self._loaded = None, None

    def close(self) -> None:
        self._close_engine()
        super().close()

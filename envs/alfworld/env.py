"""``ALFWorldEnv``: ALFWorld's household tasks on the real TextWorld/PDDL engine.

By default the environment plays the generated panels (``tasks/alfworld``): each panel row is a
compact game spec that is rebuilt into a ``game.tw-pddl`` file in the cache and checked against
the row's sha256. With ``data_dir`` (or ``official=True`` and ``ALFWORLD_DATA``) it plays a user's
own download of the official games instead; everything else is the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs.actions import ExtractedAction, strip_span
from agentenvs.core import TextEnv, Transition
from agentenvs.envs.alfworld import SPEC
from agentenvs.envs.alfworld.engine import AlfredEngine, cache_dir, user_data_dir
from agentenvs.envs.alfworld.milestones import MilestoneTracker
from agentenvs.envs.alfworld.official import official_splits, official_tasks, split_root
from agentenvs.envs.alfworld.problem import GENERATOR_VERSION, TASK_TYPES, build_game, game_sha256, traj_data
from agentenvs.errors import InvalidArgument, PanelIntegrityError, UnknownSplit
from agentenvs.info import text_hash

INSTRUCTIONS = """You are an agent in a household (ALFWorld). Each turn you read what you observe and give one command.
The first observation describes the room and ends with your task ("Your task is to: ...").
Objects and receptacles are named by type and number, e.g. "apple 1", "countertop 2", "fridge 1".

Commands:
  go to {receptacle}                    walk to a receptacle (and see what is on or in it)
  open {receptacle} / close {receptacle}
  take {object} from {receptacle}       you can hold one object at a time
  put {object} in/on {receptacle}
  clean {object} with {sinkbasin}       heat {object} with {microwave}       cool {object} with {fridge}
  use {lamp}                            switch a desk lamp on (to look at an object under it, hold the object)
  slice {object} with {knife}
  examine {object or receptacle}, look, inventory

"Nothing happens." means the command was not possible here. The list of admissible commands is given
when available. You have at most {max_turns} turns. Write your reasoning if you like, then the command
inside <action>...</action>, e.g. <action>go to countertop 1</action>."""


class ALFWorldEnv(TextEnv):
    """ALFWorld text games: goal ``Your task is to: ...``, success when the PDDL goal holds."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    default_split: ClassVar[str] = "valid_unseen"
    action_format: ClassVar[str] = "one ALFWorld command inside <action>...</action> (e.g. 'go to fridge 1')"
    has_admissible_actions: ClassVar[bool] = True
    has_privileged: ClassVar[bool] = True

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        official: bool = False,
        reward_scale: float = 1.0,
        max_turns: int | None = None,
        privileged: bool = False,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, privileged=privileged, render_mode=render_mode)
        if isinstance(reward_scale, bool) or not isinstance(reward_scale, (int, float)) or reward_scale <= 0:
            raise InvalidArgument(
                f"reward_scale must be a positive number (1 by default, 10 as in verl-agent), got {reward_scale!r}"
            )
        self.reward_scale = float(reward_scale)
        self.reward_range_ = (0.0, self.reward_scale)
        if data_dir is None and official:
            data_dir = user_data_dir()
            if data_dir is None:
                raise InvalidArgument(
                    "official=True needs the official data: set ALFWORLD_DATA to your alfworld-download "
                    "folder or pass data_dir"
                )
        self.data_root: Path | None = split_root(data_dir) if data_dir is not None else None
        self.instructions = INSTRUCTIONS.replace("{max_turns}", str(self.max_turns))
        self._engine: AlfredEngine | None = None
        self._admissible: list[str] = []
        self._milestones: MilestoneTracker | None = None
        self._valid = self._invalid = 0

    # ------------------------------------------------------------------ tasks

    @property
    def source(self) -> str:
        return "generated" if self.data_root is None else "official"

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        if self.data_root is None:
            return super().tasks(split)
        self._check_split(split)
        return official_tasks(str(self.data_root), split)

    def splits(self) -> dict[str, int]:
        return super().splits() if self.data_root is None else official_splits(self.data_root)

    def _check_split(self, split: str) -> None:
        if split not in self.splits():
            raise UnknownSplit(
                f"{self.name} ({self.source}) has no split {split!r}; its splits are {sorted(self.splits())}"
            )

    def game_path(self, task: dict[str, Any]) -> str:
        """The ``game.tw-pddl`` of a task: the official file, or the generated one rebuilt in the cache."""
        if "game_path" in task:
            return task["game_path"]
        return str(materialise(task))

    # ------------------------------------------------------------------ episode

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        if self._engine is None:
            self._engine = AlfredEngine(expert=self.privileged)
        self._engine.load(self.game_path(task))
        state = self._engine.reset()
        self._milestones = MilestoneTracker(task["task_type"], task["params"])
        self._valid = self._invalid = 0
        return self._observe(state, state["feedback"], action_valid=None)

    def _step(self, action: str) -> Transition:
        assert self._engine is not None
        command = action.strip()
        valid = command in self._admissible
        state, _, _ = self._engine.step(command)
        observation, info = self._observe(state, state["feedback"], action_valid=valid)
        won = bool(state["won"])
        if won:
            info["success"] = True
        return Transition(observation, self.reward_scale if won else 0.0, terminated=won, info=info)

    def _observe(self, state: Any, feedback: str, action_valid: bool | None) -> tuple[str, dict[str, Any]]:
        assert self._milestones is not None
        if action_valid is not None:
            self._valid += action_valid
            self._invalid += not action_valid
        self._admissible = list(state["admissible_commands"])
        facts = sorted(str(fact) for fact in state["_facts"])
        info: dict[str, Any] = {
            "admissible_actions": list(self._admissible),
            "anchor": state_anchor(self._task["task_id"], facts),
            "state_hash": text_hash("\n".join(facts)),
            "milestones": self._milestones.update(state["_facts"]),
            "score": 1.0 if state["won"] else 0.0,
            "metrics": {"invalid_actions": float(self._invalid), "valid_actions": float(self._valid)},
        }
        if action_valid is not None:
            info["action_valid"] = action_valid
        if self.privileged:
            info["privileged"] = {"expert_plan": list(state.get("extra.expert_plan") or [])}
        return feedback, info

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Two walks to the third receptacle, by way of the first or the second: one state by two
        paths (for the conformance suite's anchor check); None in a room with fewer than three."""
        walks = [command for command in self._admissible if command.startswith("go to ")]
        if len(walks) < 3:
            return None
        return [walks[0], walks[2]], [walks[1], walks[2]]

    # ------------------------------------------------------------------ actions and description

    def extract_action(self, response: str) -> ExtractedAction | None:
        """The default grammar (last ``<action>`` block, else the last line); a trailing period or
        quotes around an admissible command are left out of the action."""
        found = super().extract_action(response)
        if found is None or found.action in self._admissible:
            return found
        start, end = found.start, found.end
        while end > start and response[end - 1] in ".!'\"`":
            end -= 1
        while start < end and response[start] in "'\"`":
            start += 1
        narrowed = strip_span(response, start, end)
        return narrowed if narrowed.action in self._admissible else found

    def _describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "data_dir": str(self.data_root) if self.data_root else None,
            "reward_scale": self.reward_scale,
            "task_types": list(TASK_TYPES),
            "engine": "alfworld 0.4.2 on textworld 1.7.0 (PDDL backend, fast-downward planner expert)",
        }  # fmt: skip

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        super().close()


HISTORY_FACTS = ("not_", "checked(")
"""Facts that record the path rather than the state: TextWorld's ``not_*`` (where the agent has been,
what it moved) and the PDDL domain's ``checked`` (what was looked at; no action's precondition reads it)."""


def state_anchor(task_id: str, facts: list[str]) -> str:
    """The task and its PDDL facts less :data:`HISTORY_FACTS`: the state, the same whatever the path to it."""
    return text_hash("\n".join([task_id, *(fact for fact in facts if not fact.startswith(HISTORY_FACTS))]))


def games_dir() -> Path:
    return cache_dir() / "games" / f"v{GENERATOR_VERSION}"


def materialise(task: dict[str, Any]) -> Path:
    """Rebuild a panel row's ``game.tw-pddl`` (and ``traj_data.json``) in the cache, once; the
    rebuilt file must have the sha256 the row records."""
    folder = games_dir() / task["game_sha256"][:24]
    path = folder / "game.tw-pddl"
    if path.is_file():
        return path
    game = build_game(task)
    digest = game_sha256(game)
    if digest != task["game_sha256"]:
        raise PanelIntegrityError(
            f"task {task['task_id']}: the rebuilt game has sha256 {digest}, the panel records {task['game_sha256']}. "
            "The alfworld wheel's tables or game logic differ from the ones the panel was generated with: install "
            "alfworld==0.4.2 (pip install 'agentenvs[alfworld]') or regenerate the panels "
            "(python -m agentenvs.tasks.alfworld.generate)."
        )
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (("traj_data.json", traj_data(task)), ("game.tw-pddl", game)):
        temporary = folder / f".{name}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(content), encoding="utf-8")
        os.replace(temporary, folder / name)
    return path

"""``TextEnv``: the gymnasium environment every agentenvs environment is built on.

The base class owns what is the same everywhere (turn counting, ``max_turns`` truncation, the
end-of-episode guard, the action size limit, task and seed resolution, replay-based state, and the
assembly of the info vocabulary), so an environment writes only its own logic in three hooks:

- ``_reset(task, rng) -> (observation, info)``
- ``_step(action) -> Transition``
- optionally ``extract_action``, ``_get_state``/``_set_state`` and ``_describe``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentenvs import panels
from agentenvs.actions import ExtractedAction, extract_action
from agentenvs.errors import (
    ActionTooLong,
    EpisodeOver,
    InvalidActionType,
    InvalidArgument,
    ResetNeeded,
    UnknownSplit,
    UnknownTask,
)
from agentenvs.info import EPISODE_END_KEYS
from agentenvs.seeding import check_seed, derive_seed, rng_for

TEXT_CHARSET = frozenset(string.printable)
"""Observations are printable ASCII, so they always lie in ``observation_space``."""

RESET_OPTIONS = frozenset({"task_id", "split"})


@dataclass
class Transition:
    """What an environment's ``_step`` returns; the base class adds the shared info keys."""

    observation: str
    reward: float = 0.0
    terminated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    """Environment keys of the info vocabulary: ``action_valid``, ``success`` and ``score`` when
    terminated, ``admissible_actions``, ``anchor``, ``milestones``, ``metrics``, ``privileged``..."""


def ascii_safe(text: str, limit: int = 80) -> str:
    """A printable-ASCII rendering of untrusted text (an action), cut to ``limit`` characters."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    escaped = "".join(ch if ch in TEXT_CHARSET else f"\\x{ord(ch):02x}" for ch in escaped)
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."


def _drop_end_keys(info: dict[str, Any]) -> dict[str, Any]:
    """Remove the keys that belong only to the step that ends an episode."""
    for key in EPISODE_END_KEYS:
        info.pop(key, None)
    return info


class TextEnv(gym.Env[str, str]):
    """A multi-turn text environment with the agentenvs contract (docs/contract.md)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    name: ClassVar[str] = "textenv"
    version: ClassVar[str] = "0"
    default_max_turns: ClassVar[int] = 50
    default_split: ClassVar[str] = "test"
    max_action_chars: ClassVar[int] = 4096
    max_observation_chars: ClassVar[int] = 1 << 20
    reward_range_: ClassVar[tuple[float, float]] = (0.0, 1.0)
    action_format: ClassVar[str] = "a command inside <action>...</action>"
    instructions: ClassVar[str] = ""
    has_admissible_actions: ClassVar[bool] = False
    has_native_state: ClassVar[bool] = False
    has_privileged: ClassVar[bool] = False
    has_delayed_reward: ClassVar[bool] = False

    def __init__(self, *, max_turns: int | None = None, privileged: bool = False, render_mode: str | None = None):
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise InvalidArgument(f"max_turns must be a positive integer, got {max_turns!r}")
        if render_mode not in (None, "ansi"):
            raise InvalidArgument(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self._requested_max_turns = max_turns
        self.max_turns = max_turns or self.default_max_turns
        self.privileged = bool(privileged)
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=self.max_observation_chars, min_length=0, charset=TEXT_CHARSET)
        self.action_space = spaces.Text(max_length=self.max_action_chars, min_length=0, charset=TEXT_CHARSET)
        self._task: dict[str, Any] | None = None
        self._split: str | None = None
        self._seed: int | None = None
        self._turn = 0
        self._done = False
        self._actions: list[str] = []
        self._last_observation = ""

    # ------------------------------------------------------------------ hooks for environments

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        """Start the episode of ``task``; all randomness must come from ``rng``."""
        raise NotImplementedError(f"{type(self).__name__} must implement _reset")

    def _step(self, action: str) -> Transition:
        """Carry out one action (already checked to be a string within the size limit)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _step")

    def _get_state(self) -> dict[str, Any] | None:
        """The engine's own snapshot, for environments with ``has_native_state``."""
        return None

    def _set_state(self, native: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Restore ``_get_state``'s snapshot; return the observation and environment info at that point."""
        raise InvalidArgument(f"{self.name} has no native state; restore by replay (omit 'native')")

    def turn_limit(self, task: dict[str, Any], requested: int | None) -> int:
        """The episode's turn limit: the caller's ``max_turns``, else the spec's default. An environment whose
        tasks carry their own limit overrides this (the one place limits are resolved: docs/contract.md)."""
        return requested or self.default_max_turns

    def _describe(self) -> dict[str, Any]:
        """Environment-specific additions to :meth:`describe`."""
        return {}

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        """The tasks of a split; by default the frozen panel ``tasks/<name>/panels/<split>.jsonl``."""
        return panels.load_panel(self.name, split)

    def splits(self) -> dict[str, int]:
        """Split name to number of tasks."""
        return panels.splits(self.name)

    def extract_action(self, response: str) -> ExtractedAction | None:
        """The action inside a full model response and its character span, or ``None``."""
        return extract_action(response)

    # ------------------------------------------------------------------ the contract

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def done(self) -> bool:
        return self._done

    @property
    def task(self) -> dict[str, Any] | None:
        return self._task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        options = dict(options or {})
        unknown = set(options) - RESET_OPTIONS
        if unknown:
            raise InvalidArgument(f"unknown reset options {sorted(unknown)}; accepted: {sorted(RESET_OPTIONS)}")
        seed = check_seed(seed)
        super().reset(seed=None if seed is None else int(seed))
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        seed = int(seed)
        split = options.get("split", self.default_split)
        if not isinstance(split, str):
            raise InvalidArgument(f"options['split'] must be a string, got {split!r}")
        available = self.splits()
        if split not in available:
            raise UnknownSplit(f"{self.name} has no split {split!r}; its splits are {sorted(available)}")
        task = self._resolve_task(split, options.get("task_id"), seed)
        self._task, self._split, self._seed = task, split, seed
        self._turn, self._done, self._actions = 0, False, []
        self.max_turns = self.turn_limit(task, self._requested_max_turns)
        observation, env_info = self._reset(task, rng_for(self.name, task["task_id"], seed))
        self._last_observation = observation
        return observation, self._assemble_info(env_info)

    def _resolve_task(self, split: str, task_id: Any, seed: int) -> dict[str, Any]:
        tasks = self.tasks(split)
        if task_id is None:
            if not tasks:
                raise UnknownSplit(f"split {split!r} of {self.name} is empty")
            return tasks[derive_seed(self.name, split, seed) % len(tasks)]
        if not isinstance(task_id, str):
            raise InvalidArgument(f"options['task_id'] must be a string, got {task_id!r}")
        for task in tasks:
            if task["task_id"] == task_id:
                return task
        examples = ", ".join(t["task_id"] for t in tasks[:3])
        raise UnknownTask(f"{self.name} split {split!r} has no task {task_id!r} (ids look like: {examples})")

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise ResetNeeded(f"{self.name}: call reset() before step()")
        if self._done:
            raise EpisodeOver(f"{self.name}: the episode has ended; call reset() to start a new one")
        if not isinstance(action, str):
            raise InvalidActionType(f"the action must be a str, got {type(action).__name__}")
        if len(action) > self.max_action_chars:
            raise ActionTooLong(
                f"the action has {len(action)} characters, over the limit of {self.max_action_chars}; "
                "send only the action (extract_action(response) finds it in a full response)"
            )
        transition = self._step(action)
        self._actions.append(action)
        self._turn += 1
        terminated = bool(transition.terminated)
        truncated = not terminated and self._turn >= self.max_turns
        info = dict(transition.info)
        if terminated:
            info.setdefault("success", False)
            info["end_reason"] = "success" if info["success"] else "failure"
        elif truncated:
            info["success"] = False
            info["end_reason"] = "max_turns"
        else:
            _drop_end_keys(info)
        self._done = terminated or truncated
        self._last_observation = transition.observation
        return transition.observation, float(transition.reward), terminated, truncated, self._assemble_info(info)

    def _assemble_info(self, env_info: dict[str, Any]) -> dict[str, Any]:
        info = {"task_id": self._task["task_id"], "split": self._split, "turn": self._turn, "max_turns": self.max_turns}
        if "task_type" in self._task:
            info["task_type"] = self._task["task_type"]
        info.update(env_info)
        if not self.privileged:
            info.pop("privileged", None)
        return info

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot; restored exactly by :meth:`set_state`."""
        if self._task is None:
            raise ResetNeeded(f"{self.name}: call reset() before get_state()")
        state: dict[str, Any] = {
            "env": self.name,
            "version": self.version,
            "task_id": self._task["task_id"],
            "split": self._split,
            "seed": self._seed,
            "actions": list(self._actions),
        }
        native = self._get_state() if self.has_native_state else None
        if native is not None:
            state["native"] = native
            state["done"] = self._done
        return state

    def set_state(self, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Restore a snapshot from :meth:`get_state`; returns the observation and info at that point.

        Without a native snapshot the episode is replayed from reset, which determinism makes exact.
        """
        required = {"env", "task_id", "split", "seed", "actions"}
        if not isinstance(state, dict) or not required <= set(state):
            raise InvalidArgument(f"a state must be a dict from get_state() with keys {sorted(required)}")
        if state["env"] != self.name:
            raise InvalidArgument(f"this state belongs to {state['env']!r}, not {self.name!r}")
        if not isinstance(state["actions"], list) or not all(isinstance(a, str) for a in state["actions"]):
            raise InvalidArgument("state['actions'] must be a list of strings")
        observation, info = self.reset(
            seed=state["seed"], options={"task_id": state["task_id"], "split": state["split"]}
        )
        if "native" in state and self.has_native_state:
            observation, env_info = self._set_state(state["native"])
            self._actions = list(state["actions"])
            self._turn = len(self._actions)
            self._done = bool(state.get("done", False))
            self._last_observation = observation
            if not self._done:
                env_info = _drop_end_keys(dict(env_info))
            return observation, self._assemble_info(env_info)
        for action in state["actions"]:
            if self._done:
                raise InvalidArgument("the state's actions go past the end of the episode")
            observation, _, _, _, info = self.step(action)
        return observation, info

    # ------------------------------------------------------------------ self-description

    def describe(self) -> dict[str, Any]:
        """Name, version, splits, limits, action format, instructions and capabilities."""
        description = {
            "name": self.name,
            "version": self.version,
            "splits": self.splits(),
            "default_split": self.default_split,
            "max_turns": self.max_turns,
            "max_action_chars": self.max_action_chars,
            "reward_range": list(self.reward_range_),
            "action_format": self.action_format,
            "instructions": self.instructions,
            "capabilities": {
                "admissible_actions": self.has_admissible_actions,
                "state": "native" if self.has_native_state else "replay",
                "privileged": self.has_privileged,
                "delayed_reward": self.has_delayed_reward,
            },
        }
        description.update(self._describe())
        return description

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        return None

"""ScienceWorld's 30 science tasks (boil, grow a plant, test conductivity...) on the real Java engine.

Rules and the reward are documented in ``docs/sciworld.md``. In short: ``raw_score`` is the
engine's 0-100 task score (negative once the task has failed); ``score`` is ``raw_score / 100``
clipped to [0, 1]; the default (dense) reward is the increase of ``score`` on each step, as the
package's wrapper pays it (the return is the final score minus the score at reset, which some worlds
start above 0); ``reward="sparse"`` pays the final score on the last step only. The episode terminates
when the engine reports the task completed (success at 100) or failed (a negative score: focusing on
the wrong object, for instance).

Stepping uses the engine's raw calls (about 5 ms a step on an idle machine); the valid actions,
which cost about 100 ms, are computed only with ``admissible_actions=True`` and cached per observed
state.
"""

from __future__ import annotations

import re
import weakref
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TEXT_CHARSET, TextEnv, Transition
from agentenvs.envs.sciworld import SPEC
from agentenvs.envs.sciworld.engine import (
    SIMPLIFICATIONS,
    UNKNOWN_ACTION,
    load_world,
    raw_score,
    simplification_string,
)
from agentenvs.envs.sciworld.jvm import DEFAULT_HEAP_MB, ScienceWorldJVM, python_rss_mb
from agentenvs.errors import InvalidArgument
from agentenvs.info import text_hash

REWARD_MODES = ("dense", "sparse")
ADMISSIBLE_CACHE_SIZE = 512


def printable(text: str) -> str:
    """The engine's text restricted to printable ASCII (the observation space); anything else becomes '?'."""
    return "".join(ch if ch in TEXT_CHARSET else "?" for ch in text)


def clean_action(action: str) -> str:
    """One line of printable ASCII: the engine's parser knows only ASCII words separated by spaces."""
    return " ".join(printable(action).split())


def parse_simplifications(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"easy"``, ``"openDoors,teleportAction"`` or a list of names, checked against the package's list."""
    names = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise InvalidArgument(f"simplifications must be a string or a list of strings, got {value!r}")
    chosen: list[str] = []
    for name in (n.strip() for n in names):
        if not name:
            continue
        if name == "easy":
            chosen.extend(SIMPLIFICATIONS)
        elif name in SIMPLIFICATIONS:
            chosen.append(name)
        else:
            raise InvalidArgument(
                f"unknown ScienceWorld simplification {name!r}; choose from 'easy' or {list(SIMPLIFICATIONS)}"
            )
    return tuple(dict.fromkeys(chosen))


def task_turn_limit(task: dict[str, Any]) -> int:
    """At least ``default_max_turns``, and twice the task's gold path (rows without one get the floor)."""
    return max(ScienceWorldEnv.default_max_turns, 2 * task.get("gold_length", 0))


class ScienceWorldEnv(TextEnv):
    """One ScienceWorld episode at a time, on a JVM of its own that is reused across resets."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    """The least turn limit of a task; a task whose gold path is longer than half of it gets twice
    its gold path (one test task's gold path has 760 steps). ``max_turns=`` overrides both."""
    reward_range_: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    action_format: ClassVar[str] = (
        "one ScienceWorld command inside <action>...</action>, e.g. <action>go to kitchen</action>"
    )
    instructions: ClassVar[str] = (
        "You are an agent in ScienceWorld, a text-based simulation of a house with a kitchen, workshop, greenhouse, "
        "and other rooms. Complete the science task described in the first observation. Each turn, answer with "
        "exactly one command inside <action></action>. Useful commands: look around, look at OBJ, look in OBJ, "
        "go to LOCATION, open OBJ, close OBJ, pick up OBJ, put down OBJ, move OBJ to OBJ, pour OBJ into OBJ, "
        "mix OBJ, activate OBJ, deactivate OBJ, use OBJ on OBJ, connect OBJ to OBJ, disconnect OBJ, read OBJ, "
        "eat OBJ, flush OBJ, focus on OBJ, wait, wait1, inventory, task. 'focus on' marks the object the task is "
        "about: focusing on the wrong object fails the task. Doors must be opened before you can go through them. "
        "When the game says your request is ambiguous, answer with the number of the option you mean."
    )
    has_admissible_actions: ClassVar[bool] = True
    has_privileged: ClassVar[bool] = True

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        privileged: bool = False,
        render_mode: str | None = None,
        reward: str = "dense",
        admissible_actions: bool = False,
        simplifications: str | list[str] = "",
        heap_mb: int = DEFAULT_HEAP_MB,
        deterministic: bool = True,
    ):
        super().__init__(max_turns=max_turns, privileged=privileged, render_mode=render_mode)
        if reward not in REWARD_MODES:
            raise InvalidArgument(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if isinstance(heap_mb, bool) or not isinstance(heap_mb, int) or heap_mb < 128:
            raise InvalidArgument(f"heap_mb must be an integer of at least 128 (MB), got {heap_mb!r}")
        self.reward_mode = reward
        self.admissible_actions = bool(admissible_actions)
        self.simplifications = parse_simplifications(simplifications)
        self.jvm = ScienceWorldJVM(heap_mb=heap_mb, deterministic=bool(deterministic))
        self._finalizer = weakref.finalize(self, self.jvm.close)
        self._admissible_cache: OrderedDict[str, list[str]] = OrderedDict()
        self._raw = 0
        self._best = 0
        self._milestones: list[str] = []
        self._invalid = 0
        self._expert_plan: list[str] = []

    # ------------------------------------------------------------------ episode

    def turn_limit(self, task: dict[str, Any], requested: int | None) -> int:
        """The caller's ``max_turns``, else the task's own limit (:func:`task_turn_limit`)."""
        return requested or task_turn_limit(task)

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        """Load a fresh world of the task's variation (the engine has no randomness beyond it)."""
        self.jvm.start()
        name = task["task_name"]
        simplified = simplification_string(name, self.simplifications)
        plan_now = self.privileged and "gold" not in task
        first = load_world(self.jvm, name, task["variation"], simplified, gold=plan_now)
        if self.privileged:
            gold = [str(a) for a in self.jvm.call("getGoldActionSequence")] if plan_now else task["gold"]
            self._expert_plan = list(gold)
        self._raw, self._best, self._milestones, self._invalid = raw_score(self.jvm), 0, [], 0
        description = printable(str(self.jvm.call("freeActionTaskDesc")))
        observation = f"{description}\n\n{printable(first)}"
        info = self._state_info()
        if self.privileged:
            info["privileged"] = {
                "expert_plan": list(self._expert_plan),
                "task_params": {"variation": task["variation"], "simplifications": simplified},
            }
        return observation, info

    def _step(self, action: str) -> Transition:
        previous = self._clipped_score()
        observation = printable(str(self.jvm.call("step", clean_action(action))))
        self._raw = raw_score(self.jvm)
        valid = observation.strip() != UNKNOWN_ACTION
        self._invalid += not valid
        if self._raw > self._best:
            self._best = self._raw
            self._milestones.append(f"score-{self._raw}")
        terminated = bool(self.jvm.call("getCompleted")) or self._raw < 0
        score = self._clipped_score()
        if self.reward_mode == "dense":
            reward = score - previous
        else:
            last = terminated or self.turn + 1 >= self.max_turns
            reward = score if last else 0.0
        info = self._state_info()
        info["action_valid"] = valid
        if terminated:
            info["success"] = self._raw >= 100
        return Transition(observation, reward, terminated, info)

    def _clipped_score(self) -> float:
        return min(max(self._raw, 0), 100) / 100.0

    def _state_info(self) -> dict[str, Any]:
        look = str(self.jvm.call("freeActionLook"))
        inventory = str(self.jvm.call("freeActionInventory"))
        observed = text_hash(f"{self._task['task_id']}\n{look}\n{inventory}")
        info: dict[str, Any] = {
            "score": self._clipped_score(),
            "raw_score": self._raw,
            "milestones": list(self._milestones),
            "anchor": text_hash(f"{observed}\n{self._raw}"),
            "metrics": {"moves": int(self.jvm.call("getNumMoves")), "invalid_actions": self._invalid},
        }
        if self.admissible_actions:
            info["admissible_actions"] = self._admissible(observed)
        return info

    def _admissible(self, observed: str) -> list[str]:
        """The engine's valid action-object combinations, cached by the observed state (look and inventory)."""
        cached = self._admissible_cache.get(observed)
        if cached is None:
            cached = sorted(printable(str(a)) for a in self.jvm.call("getValidActionObjectCombinations"))
            self._admissible_cache[observed] = cached
            if len(self._admissible_cache) > ADMISSIBLE_CACHE_SIZE:
                self._admissible_cache.popitem(last=False)
        else:
            self._admissible_cache.move_to_end(observed)
        return list(cached)

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Two closed doors opened in either order: one state by two paths (for the conformance
        suite's anchor check); None where fewer than two doors can be opened by name."""
        look = str(self.jvm.call("freeActionLook"))
        closed = {f"open door to {room}" for room in re.findall(r"A door to the (.+?) \(that is closed\)", look)}
        valid = {printable(str(a)) for a in self.jvm.call("getValidActionObjectCombinations")}
        opens = sorted(closed & valid)
        if len(opens) < 2:
            return None
        return [opens[0], opens[1]], [opens[1], opens[0]]

    # ------------------------------------------------------------------ resources

    def memory_mb(self) -> dict[str, float | None]:
        """Resident memory of the JVM and of this Python process, in MB."""
        return {"jvm_rss_mb": self.jvm.rss_mb(), "python_rss_mb": python_rss_mb()}

    def close(self) -> None:
        self.jvm.close()
        super().close()

    def _describe(self) -> dict[str, Any]:
        return {
            "reward_mode": self.reward_mode,
            "simplifications": list(self.simplifications),
            "admissible_actions_enabled": self.admissible_actions,
            "engine": {
                "package": "scienceworld==1.2.3",
                "heap_mb": self.jvm.heap_mb,
                "deterministic": self.jvm.deterministic,
            },
        }

"""Drawing one game spec: floor plan, goal parameters, object placements and the agent's start.

The rules are ALFRED's: a task type only in the room types ``GOALS_VALID`` allows, a target object
the type can act on (``VAL_ACTION_OBJECTS``), objects only where ``VAL_RECEPTACLE_OBJECTS`` lets
them lie, up to three instances per class, and no target already where the goal wants it.
Every draw comes from one generator seeded by (version, seed, split, task type, index, attempt).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from agentenvs.envs.alfworld.engine import alfworld_gen
from agentenvs.envs.alfworld.problem import goal_text
from agentenvs.envs.alfworld.scenes import LAMPS, Scene, can_contain, load_scene, scene_type

HELD_OUT_CLASSES = frozenset({"Tomato", "Cup", "Lettuce", "Cloth", "CD", "Pillow", "Ladle"})
"""Object classes that appear only in ``valid_unseen`` (there as every target): with the held-out
floor plans they make that split out of distribution in objects as well as rooms."""
LAMP_RECEPTACLES = ("Desk", "SideTable", "Shelf", "Dresser")
"""Where ALFWorld's desk lamps stand (every lamp in the official games is on one of these)."""
STATE_RECEPTACLE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
AFFORDANCE = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}
NOT_A_PARENT = {"Toaster", "BathtubBasin"}
MAX_DISTRACTOR_CLASSES = 8
RECEPTACLE_RANGE = (10, 16)
"""Receptacles per game: a drawn subset of the floor plan's (which has 5 to 47). Fast-downward's
search grows steeply with the number of locations (a 47-receptacle kitchen can take a minute to
plan); with at most 16 every game is planned in well under a second."""
MAX_INSTANCES = 3
"""ALFRED's ``MAX_NUM_OF_OBJ_INSTANCES``."""


@dataclass(frozen=True)
class SplitRule:
    floor_plans: tuple[int, ...]
    unseen: bool
    """Targets come from :data:`HELD_OUT_CLASSES`; otherwise those classes are left out entirely."""


@cache
def split_rules() -> dict[str, SplitRule]:
    constants = alfworld_gen("constants")

    seen = tuple(constants.TRAIN_SCENE_NUMBERS)
    return {
        "train": SplitRule(seen, unseen=False),
        "valid_seen": SplitRule(seen, unseen=False),
        "valid_unseen": SplitRule(tuple(constants.TEST_SCENE_NUMBERS), unseen=True),
    }


class NoCandidate(Exception):
    """This draw has no valid choice (a floor plan without a fitting object); draw again."""


def _choice(rng: np.random.Generator, options: list[Any]) -> Any:
    if not options:
        raise NoCandidate
    return options[int(rng.integers(len(options)))]


def _parents(scene: Scene, task_type: str, target: str) -> list[str]:
    excluded = NOT_A_PARENT | {STATE_RECEPTACLE.get(task_type, "")}
    return sorted({r.cls for r in scene.receptacles if can_contain(r.cls, target)} - excluded)


def _targets(scene: Scene, task_type: str, classes: list[str]) -> list[str]:
    constants = alfworld_gen("constants")

    receptacle_classes = {r.cls for r in scene.receptacles}
    if task_type in STATE_RECEPTACLE:
        if STATE_RECEPTACLE[task_type] not in receptacle_classes:
            return []
        classes = [c for c in classes if c in constants.VAL_ACTION_OBJECTS[AFFORDANCE[task_type]]]
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in scene.object_classes or not receptacle_classes & set(LAMP_RECEPTACLES):
            return []
        return [c for c in classes if c not in LAMPS]
    return [c for c in classes if c not in LAMPS and _parents(scene, task_type, c)]


def _receptacle_subset(rng: np.random.Generator, scene: Scene, task_type: str, params: dict[str, Any]) -> list[int]:
    """Indices of the receptacles this game keeps: one of each class the task needs, then a random rest."""
    receptacles = scene.receptacles
    needed = [STATE_RECEPTACLE.get(task_type, ""), params["parent_target"]]
    if task_type == "look_at_obj_in_light":
        needed.append(_choice(rng, sorted({r.cls for r in receptacles} & set(LAMP_RECEPTACLES))))
    kept: list[int] = []
    for cls in filter(None, needed):
        kept.append(_choice(rng, [i for i, r in enumerate(receptacles) if r.cls == cls and i not in kept]))
    size = min(len(receptacles), int(rng.integers(RECEPTACLE_RANGE[0], RECEPTACLE_RANGE[1] + 1)))
    rest = [i for i in range(len(receptacles)) if i not in kept]
    kept += [rest[int(i)] for i in rng.permutation(len(rest))[: max(0, size - len(kept))]]
    return sorted(kept)


def _agent_start(rng: np.random.Generator, locations: list[Any]) -> list[int]:
    """A start pose inside the kept receptacles' bounding box, on no receptacle's spot."""
    taken = set(map(tuple, locations))
    xs = [location[0] for location in locations]
    zs = [location[1] for location in locations]
    for _ in range(100):
        agent = [int(rng.integers(min(xs), max(xs) + 1)), int(rng.integers(min(zs), max(zs) + 1)),
                 int(rng.integers(0, 4)), 30]  # fmt: skip
        if tuple(agent) not in taken:
            return agent
    raise NoCandidate


def draw_spec(rng: np.random.Generator, split: str, task_type: str) -> dict[str, Any]:
    """One candidate game (not yet solved); raises :class:`NoCandidate` when the draw is a dead end."""
    constants = alfworld_gen("constants")

    rule = split_rules()[split]
    plans = [fp for fp in rule.floor_plans if scene_type(fp) in constants.GOALS_VALID[task_type]]
    scene = load_scene(_choice(rng, plans))
    movable = [c for c in scene.object_classes if c not in LAMPS]
    if rule.unseen:
        candidates = [c for c in movable if c in HELD_OUT_CLASSES]
        allowed = movable
    else:
        candidates = allowed = [c for c in movable if c not in HELD_OUT_CLASSES]
    target = _choice(rng, _targets(scene, task_type, candidates))
    params = {
        "object_target": target,
        "parent_target": "",
        "toggle_target": "",
        "mrecep_target": "",
        "object_sliced": False,
    }
    if task_type == "look_at_obj_in_light":
        params["toggle_target"] = "DeskLamp"
    else:
        params["parent_target"] = _choice(rng, _parents(scene, task_type, target))

    kept = _receptacle_subset(rng, scene, task_type, params)
    receptacles = scene.receptacles

    def spots(cls: str, avoid: tuple[str, ...] = ()) -> list[int]:
        return [i for i in kept if can_contain(receptacles[i].cls, cls) and receptacles[i].cls not in avoid]

    counts = {target: int(rng.integers(2, MAX_INSTANCES + 1)) if task_type == "pick_two_obj_and_place"
              else int(rng.integers(1, MAX_INSTANCES + 1))}  # fmt: skip
    others = [c for c in allowed if c != target]
    for index in rng.permutation(len(others))[
        : int(rng.integers(MAX_DISTRACTOR_CLASSES // 2, MAX_DISTRACTOR_CLASSES + 1))
    ]:
        counts[others[int(index)]] = int(rng.integers(1, MAX_INSTANCES + 1))
    objects: list[list[Any]] = []
    for cls in sorted(counts):
        avoid = (params["parent_target"], STATE_RECEPTACLE.get(task_type, "")) if cls == target else ()
        places = spots(cls, avoid)
        if not places:
            if cls == target:
                raise NoCandidate
            continue
        objects += [[cls, _choice(rng, places)] for _ in range(counts[cls])]
    if task_type == "look_at_obj_in_light":
        lamp_spots = [i for i in kept if receptacles[i].cls in LAMP_RECEPTACLES]
        objects.append(["DeskLamp", _choice(rng, lamp_spots)])

    agent = _agent_start(rng, [receptacles[i].location for i in kept])
    return {
        "task_type": task_type,
        "floor_plan": scene.floor_plan,
        "params": params,
        "goal": goal_text(task_type, params, int(rng.integers(2))) + ".",
        "receptacles": kept,
        "objects": objects,
        "agent": agent,
    }

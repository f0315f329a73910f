"""Sub-goal milestones of an ALFWorld task, read from the engine's PDDL facts.

Each milestone is a fact about the goal's target object that the expert's plan must make true on
the way: it was seen, picked up, cleaned/heated/cooled, placed (and a second one placed), or the
lamp was switched on. They are cumulative: once reached, a milestone stays in the list.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

STATE_FACT = {
    "pick_clean_then_place_in_recep": ("isclean", "cleaned_target"),
    "pick_heat_then_place_in_recep": ("ishot", "heated_target"),
    "pick_cool_then_place_in_recep": ("iscool", "cooled_target"),
}


def _index(facts: list[Any]) -> dict[str, list[tuple[str, ...]]]:
    """Facts by predicate; fast-downward lowercases every name, so everything here is lowercase."""
    by_name: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for fact in facts:
        by_name[fact.name.lower()].append(tuple(arg.name.lower() for arg in fact.arguments))
    return by_name


def _type(cls: str) -> str:
    return f"{cls}type".lower()


def milestones_now(facts: list[Any], task_type: str, params: dict[str, str]) -> list[str]:
    """The milestones that hold in this state (from TextWorld ``Proposition`` facts, raw PDDL ids)."""
    f = _index(facts)
    types = {args[0]: args[1] for args in f["objecttype"]}
    rtypes = {args[0]: args[1] for args in f["receptacletype"]}
    targets = {o for o, t in types.items() if t == _type(params["object_target"])}
    agent_at = {args[1] for args in f["atlocation"]}
    at_location = {r for r, loc in f["receptacleatlocation"] if loc in agent_at}
    openable = {args[0] for args in f["openable"]}
    opened = {args[0] for args in f["opened"]}
    held = {o for _, o in f["holds"]}
    inside = {o: r for o, r in f["inreceptacle"]}
    visible = {o for o, r in inside.items() if r in at_location and (r not in openable or r in opened)}

    reached = []
    if targets & (visible | held):
        reached.append("seen_target")
    if targets & held:
        reached.append("holding_target")
    state_fact, state_milestone = STATE_FACT.get(task_type, (None, None))
    ready = targets
    if state_fact:
        ready = targets & {args[0] for args in f[state_fact]}
        if ready:
            reached.append(state_milestone)
    if task_type == "look_at_obj_in_light":
        lamps = {o for o, t in types.items() if t == _type(params["toggle_target"])}
        if lamps & {args[0] for args in f["istoggled"]}:
            reached.append("lamp_on")
        return reached
    parent = _type(params["parent_target"])
    placed = [o for o in ready if o in inside and rtypes.get(inside[o]) == parent]
    if placed:
        reached.append("placed_target")
    if task_type == "pick_two_obj_and_place" and len(placed) >= 2:
        reached.append("placed_second_target")
    return reached


class MilestoneTracker:
    """Accumulates milestones over an episode, in the order they were first reached."""

    def __init__(self, task_type: str, params: dict[str, str]):
        self.task_type = task_type
        self.params = params
        self.reached: list[str] = []

    def update(self, facts: list[Any]) -> list[str]:
        for milestone in milestones_now(facts, self.task_type, self.params):
            if milestone not in self.reached:
                self.reached.append(milestone)
        return list(self.reached)

"""A game spec (a panel row) to the ``game.tw-pddl`` file ALFWorld's engine plays.

The spec holds only what was drawn: the floor plan, where each object sits, the agent's start and
the goal parameters. Everything else (receptacles, affordances, ``canContain``, the domain and the
grammar) comes from the alfworld wheel, so the file is rebuilt byte-identically from a short row
and its sha256 (``game_sha256`` in the row) proves it.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from functools import cache
from importlib import resources
from typing import Any

from agentenvs.envs.alfworld.engine import alfworld_gen
from agentenvs.envs.alfworld.scenes import LAMPS, load_scene, location_name, mangle, object_id

GENERATOR_VERSION = "1"
"""The version of the game format built from a task; built games are cached per version."""

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""ALFWorld's six task types, in its numbering (1..6)."""


GRAMMAR_DIALECT = (
    (
        '"rhs": "You arrive at {r.name}. #examineReceptacle.feedback#"',
        '"rhs": "You arrive at {lend.name}. #examineReceptacle.feedback#"',
    ),
    ('"rhs": "You move the {o.name} to the {r.name}."', '"rhs": "You put the {o.name} in/on the {r.name}."'),
    ('template :: "move {o} to {r}";', 'template :: "put {o} in/on {r}";'),
)
"""From the wheel's ``alfred.twl2`` to the dialect of the official ALFWorld game files (json_2.1.x):
``put X in/on Y`` and ``You arrive at loc N.``, which published agents and prompts expect."""
DOMAIN_DIALECT = (";(receptacleType ?r SinkType)", "(receptacleType ?r SinkType)")
"""The official domain also lets a ``SinkType`` receptacle clean (the wheel comments it out)."""


def _read_logic(name: str) -> str:
    return (resources.files("alfworld") / "data" / name).read_text(encoding="utf-8")


def _strip_block(text: str, start: str, end: str) -> str:
    """``text`` without the one block that runs from ``start`` to the first ``end`` after it."""
    head, found, rest = text.partition(start)
    if not found:
        raise RuntimeError(f"the alfworld wheel changed: {start!r} is missing from its game logic")
    return head + rest.split(end, 1)[1]


@cache
def game_logic() -> tuple[str, str]:
    """(domain, grammar) in the official game files' dialect, derived from the wheel's files.

    The official files have no ``help`` action; the other changes are :data:`GRAMMAR_DIALECT`.
    Every edit must apply, so a different wheel fails here instead of producing other games.
    """
    domain = _strip_block(_read_logic("alfred.pddl"), "\n(:action help", "\n)\n")
    grammar = _read_logic("alfred.twl2")
    for old, new in GRAMMAR_DIALECT:
        count = grammar.count(old)
        if count == 0:
            raise RuntimeError(f"the alfworld wheel changed: {old!r} is missing from alfred.twl2")
        grammar = grammar.replace(old, new)
    grammar = _strip_block(grammar, "\n\naction help {", '""";\n}')
    return domain.replace(*DOMAIN_DIALECT), grammar


def goal_pddl(task_type: str, params: dict[str, str]) -> str:
    gdict = alfworld_gen("goal_library").gdict

    template = gdict[task_type]["pddl"].replace("#", "-")
    return template.format(obj=params["object_target"], recep=params["parent_target"], toggle=params["toggle_target"])


def goal_text(task_type: str, params: dict[str, str], template_index: int) -> str:
    """ALFWorld's templated task text (``get_templated_task_desc``) for one of the two templates."""
    gdict = alfworld_gen("goal_library").gdict

    template = gdict[task_type]["templates"][template_index]
    return template.format(
        obj=params["object_target"].lower(),
        recep=params["parent_target"].lower(),
        toggle=params["toggle_target"].lower(),
        mrecep="",
    )


def _affordances(cls: str) -> list[str]:
    constants = alfworld_gen("constants")

    actions = constants.VAL_ACTION_OBJECTS
    facts = [] if cls in LAMPS else ["pickupable"]
    for predicate, table in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"),
                             ("toggleable", "Toggleable"), ("sliceable", "Sliceable")):  # fmt: skip
        if cls in actions[table]:
            facts.append(predicate)
    if cls in constants.MOVABLE_RECEPTACLES_SET:
        facts.append("isReceptacleObject")
    return facts


def build_problem(spec: dict[str, Any]) -> str:
    """The PDDL problem of a spec, in the layout of ALFRED's ``initial_state.pddl``."""
    constants = alfworld_gen("constants")

    scene = load_scene(spec["floor_plan"])
    receptacles = tuple(scene.receptacles[i] for i in spec["receptacles"])
    position = {index: n for n, index in enumerate(spec["receptacles"])}
    placed: list[tuple[str, str, str]] = []  # (object id, class, receptacle id)
    per_receptacle: dict[int, int] = defaultdict(int)
    taken: set[str] = set()
    for cls, index in spec["objects"]:
        receptacle = receptacles[position[index]]
        oid = mangle(object_id(cls, receptacle, per_receptacle[index]))
        while oid in taken:  # two receptacles a few centimetres apart: shift until unique
            oid += "1"
        taken.add(oid)
        placed.append((oid, cls, receptacle.id))
        per_receptacle[index] += 1
    agent_location = location_name(tuple(spec["agent"]))
    receptacle_types = sorted(set(constants.RECEPTACLES) - constants.MOVABLE_RECEPTACLES_SET)
    object_types = sorted(set(constants.OBJECTS) - set(receptacle_types))
    locations = sorted({location_name(r.location) for r in receptacles} | {agent_location})
    present_object_types = sorted({cls for _, cls, _ in placed})

    lines = [f"(define (problem plan_{spec['trial']})", "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += [f"{t}Type - otype" for t in object_types]
    lines += [f"{t}Type - rtype" for t in receptacle_types]
    lines += [f"{oid} - object" for oid, _, _ in placed]
    lines += [f"{mangle(r.id)} - receptacle" for r in receptacles]
    lines += [f"{loc} - location" for loc in locations]
    lines += [")", "(:init"]
    lines += [
        f"(canContain {r}Type {o}Type)"
        for r in sorted({r.cls for r in receptacles})
        for o in present_object_types
        if o in constants.VAL_RECEPTACLE_OBJECTS.get(r, ())
    ]
    for receptacle in receptacles:
        rid = mangle(receptacle.id)
        lines.append(f"(receptacleType {rid} {receptacle.cls}Type)")
        if receptacle.cls in constants.OPENABLE_CLASS_SET:
            lines.append(f"(openable {rid})")
        lines.append(f"(receptacleAtLocation {rid} {location_name(receptacle.location)})")
    location_of = {r.id: location_name(r.location) for r in receptacles}
    for oid, cls, rid in placed:
        lines.append(f"(objectType {oid} {cls}Type)")
        lines += [f"({fact} {oid})" for fact in _affordances(cls)]
        lines.append(f"(inReceptacle {oid} {mangle(rid)})")
        lines.append(f"(objectAtLocation {oid} {location_of[rid]})")
    lines.append(f"(atLocation agent1 {agent_location})")
    lines.append(")")
    return "\n".join(lines) + "\n" + goal_pddl(spec["task_type"], spec["params"])


def build_game(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``game.tw-pddl`` content: domain, grammar with the task text, problem, solvable flag."""
    domain, grammar = game_logic()
    task = spec["goal"].rstrip(".")
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", task),
        "pddl_problem": build_problem(spec),
        "solvable": True,
        "walkthrough": list(spec.get("walkthrough") or []),
    }


def traj_data(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``traj_data.json`` ALFWorld keeps beside each game: its task type, goal parameters and
    scene. ALFWorld's own loaders and experts read it, so the cached games also work with them."""
    return {
        "task_id": spec["trial"],
        "task_type": spec["task_type"],
        "pddl_params": spec["params"],
        "scene": {"floor_plan": f"FloorPlan{spec['floor_plan']}", "scene_num": spec["floor_plan"]},
        "turk_annotations": {"anns": [{"task_desc": spec["goal"], "high_descs": [], "votes": []}]},
    }


def game_bytes(game: dict[str, Any]) -> bytes:
    """The canonical serialisation of a game file; its sha256 is the row's ``game_sha256``."""
    core = {k: game[k] for k in ("pddl_domain", "grammar", "pddl_problem")}
    return json.dumps(core, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def game_sha256(game: dict[str, Any]) -> str:
    return hashlib.sha256(game_bytes(game)).hexdigest()

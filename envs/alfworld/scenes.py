"""Floor-plan inventories from the tables that ship in the alfworld wheel.

ALFWorld's scenes are AI2-THOR floor plans. The wheel ships, per floor plan, the object classes
present (``FloorPlanN-objects.json``) and the receptacles with their navigation poses
(``FloorPlanN-openable.json``); ``alfworld.gen.constants`` holds which receptacle may contain which
object class and which classes can be heated, cooled, cleaned or toggled. A scene here is those
tables read back, so a generated game has the receptacles, counts and positions of a real one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from agentenvs.envs.alfworld.engine import alfworld_gen
from agentenvs.seeding import rng_for

SCENE_TYPES = {
    "Kitchen": range(1, 31),
    "LivingRoom": range(201, 231),
    "Bedroom": range(301, 331),
    "Bathroom": range(401, 431),
}
BASINS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
"""ALFRED names a sink's receptacle ``Sink|x|y|z|SinkBasin`` (type SinkBasin); bathtubs alike."""
EXTRA_RECEPTACLE_COUNTS = {"StoveBurner": 4}
"""Receptacles listed in ``-objects.json`` but absent from ``-openable.json`` get this many instances (else 1)."""
LAMPS = ("DeskLamp",)
"""The lamps a look-at-in-light task can use: in ALFWorld only desk lamps stand in a receptacle."""
GRID = 0.25
"""AI2-THOR's navigation step; ALFWorld's locations are poses on this grid."""


@dataclass(frozen=True)
class Receptacle:
    """One receptacle instance: its ALFRED id (``Class|x|y|z``), class and navigation location."""

    id: str
    cls: str
    location: tuple[int, int, int, int]
    """(x, z) in grid steps, rotation in quarter turns, camera horizon in degrees."""


@dataclass(frozen=True)
class Scene:
    floor_plan: int
    scene_type: str
    receptacles: tuple[Receptacle, ...]
    object_classes: tuple[str, ...]
    """Movable (pickupable) object classes the floor plan holds, plus its lamps."""


def _constants():
    constants = alfworld_gen("constants")

    return constants


def _layout(floor_plan: int, kind: str):
    path = resources.files("alfworld.gen") / "layouts" / f"FloorPlan{floor_plan}-{kind}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def scene_type(floor_plan: int) -> str:
    for name, numbers in SCENE_TYPES.items():
        if floor_plan in numbers:
            return name
    raise ValueError(f"floor plan {floor_plan} is not an ALFRED scene (1-30, 201-230, 301-330, 401-430)")


@cache
def pickupable_classes() -> frozenset[str]:
    """Object classes some receptacle can contain: the ones ALFRED lets the agent pick up."""
    constants = _constants()
    contained = set().union(*constants.VAL_RECEPTACLE_OBJECTS.values())
    return frozenset(c for c in contained if c in constants.OBJECTS_SET and not c.endswith("Sliced"))


def receptacle_class(cls: str) -> str:
    return BASINS.get(cls, cls)


def can_contain(receptacle_cls: str, object_cls: str) -> bool:
    return object_cls in _constants().VAL_RECEPTACLE_OBJECTS.get(receptacle_cls, ())


def _pose_location(pose: list[float]) -> tuple[int, int, int, int]:
    x, z, rotation, horizon = pose
    return (round(x / GRID), round(z / GRID), round(rotation / 90) % 4, round(horizon))


def _coordinate(value: float) -> str:
    return f"{value:+06.2f}"


@cache
def load_scene(floor_plan: int) -> Scene:
    """The receptacles and object classes of one floor plan (deterministic; no randomness but a
    seeded pose for the few receptacles that ``-openable.json`` does not list)."""
    constants = _constants()
    kind = scene_type(floor_plan)
    classes = set(_layout(floor_plan, "objects"))
    receptacles: list[Receptacle] = []
    listed: set[str] = set()
    for raw_id, pose in sorted(_layout(floor_plan, "openable").items()):
        cls = raw_id.split("|")[0]
        rcls = receptacle_class(cls)
        if rcls not in constants.VAL_RECEPTACLE_OBJECTS:
            continue
        rid = f"{raw_id}|{rcls}" if cls in BASINS else raw_id
        receptacles.append(Receptacle(rid, rcls, _pose_location(pose)))
        listed.add(rcls)
    static = {receptacle_class(c) for c in classes} - set(constants.MOVABLE_RECEPTACLES) - listed
    rng = rng_for("alfworld-scene", floor_plan)
    for rcls in sorted(static & set(constants.VAL_RECEPTACLE_OBJECTS)):
        base = next((c for c, b in BASINS.items() if b == rcls), rcls)
        for _ in range(EXTRA_RECEPTACLE_COUNTS.get(rcls, 1)):
            x, y, z = (float(v) for v in rng.uniform(-3.0, 3.0, size=3))
            pose = [
                round(x / GRID) * GRID,
                round(z / GRID) * GRID,
                90 * int(rng.integers(0, 4)),
                30 * int(rng.integers(0, 3)),
            ]
            rid = f"{base}|{_coordinate(x)}|{_coordinate(abs(y) / 2)}|{_coordinate(z)}"
            rid = f"{rid}|{rcls}" if base in BASINS else rid
            receptacles.append(Receptacle(rid, rcls, _pose_location(pose)))
    present = {r.cls for r in receptacles}
    movable = sorted(c for c in classes & pickupable_classes() if any(can_contain(r, c) for r in present))
    lamps = sorted(c for c in classes if c in LAMPS)
    return Scene(floor_plan, kind, tuple(receptacles), tuple(movable + lamps))


def mangle(alfred_id: str) -> str:
    """ALFRED's id mangling for PDDL names (``|`` → ``_bar_``, ``-`` → ``_minus_`` ...)."""
    for raw, safe in (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        alfred_id = alfred_id.replace(raw, safe)
    return alfred_id


def location_name(location: tuple[int, int, int, int]) -> str:
    return mangle("loc|" + "|".join(str(v) for v in location))


def object_id(cls: str, receptacle: Receptacle, index: int) -> str:
    """A stable ALFRED-style id for the ``index``-th object placed in ``receptacle`` (no randomness,
    so a panel row needs to store only the class and the receptacle)."""
    _, x, y, z = receptacle.id.split("|")[:4]
    dx, dz = 0.07 * (index % 5), 0.09 * (index // 5)
    return f"{cls}|{_coordinate(float(x) + dx)}|{_coordinate(float(y) + 0.05)}|{_coordinate(float(z) - dz)}"

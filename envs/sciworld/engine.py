"""World-level calls on ScienceWorld's ``PythonInterface``, shared by the environment and the panel generator.

These are the raw server calls (``load``, ``step``, ``getScore``...) rather than the package's
``ScienceWorldEnv.step``, which also computes every valid action on each step (about 100 ms,
envs.md §3). The first observation is the package's own: the wrapper's ``reset`` steps
``look around`` right after loading, and so does :func:`load_world`.
"""

from __future__ import annotations

from agentenvs.envs.sciworld.jvm import ScienceWorldJVM

FIRST_ACTION = "look around"
UNKNOWN_ACTION = "No known action matches that input."
"""The engine's answer to anything its parser cannot match; the step changes nothing."""

SIMPLIFICATIONS = ("teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors", "noElectricalAction")
"""The package's simplifications; ``easy`` means all of them (the engine drops ``noElectricalAction``
for the electrical tasks)."""
ELECTRICAL_TASK_MARKERS = ("power-component", "conductivity")


def load_world(jvm: ScienceWorldJVM, task_name: str, variation: int, simplifications: str, gold: bool = False) -> str:
    """Load a fresh world (``gold``: also have the engine plan its gold path) and return its first observation."""
    jvm.call("load", task_name, int(variation), simplifications, bool(gold))
    return jvm.call("step", FIRST_ACTION)


def raw_score(jvm: ScienceWorldJVM) -> int:
    """The task score on the package's 0-100 scale (negative when the task has failed)."""
    return round(100 * float(jvm.call("getScore")))


def task_names(jvm: ScienceWorldJVM) -> list[str]:
    return [str(name) for name in jvm.call("getTaskNames")]


def variations(jvm: ScienceWorldJVM, task_name: str) -> dict[str, list[int]]:
    """The package's train/dev/test variation indices of a task (the engine reports them for the loaded task)."""
    jvm.call("load", task_name, 0, "", False)
    return {
        "train": [int(v) for v in jvm.call("getVariationsTrain")],
        "dev": [int(v) for v in jvm.call("getVariationsDev")],
        "test": [int(v) for v in jvm.call("getVariationsTest")],
    }


def simplification_string(task_name: str, simplifications: tuple[str, ...]) -> str:
    """The engine's comma-separated form; ``noElectricalAction`` is left out of the electrical tasks,
    which cannot be solved without connecting wires."""
    electrical = any(marker in task_name for marker in ELECTRICAL_TASK_MARKERS)
    kept = [s for s in simplifications if not (electrical and s == "noElectricalAction")]
    return ",".join(kept)

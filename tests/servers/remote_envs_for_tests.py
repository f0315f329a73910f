"""A small TextEnv for the server tests: counts, sleeps, fails and crashes on command.

Served with ``--env counter=remote_envs_for_tests:CounterEnv`` and this folder on ``PYTHONPATH``.
Actions: ``inc`` (+1 reward), ``sleep <seconds>`` (a slow engine), ``fail`` (the engine raises),
``crash`` (the worker process dies), ``wedge`` (the engine holds the GIL and never returns),
``finish`` (the task is solved); anything else is invalid. The constructor keyword ``slow_start_s`` makes
the constructor sleep that long (an engine that hangs while starting).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TextEnv, Transition

HERE = Path(__file__).resolve().parent
SERVE_ARG = "counter=remote_envs_for_tests:CounterEnv"
PYTHONPATH = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))}

TASKS = tuple({"task_id": f"count-{i}", "target": 3 + i} for i in range(3))


class CounterEnv(TextEnv):
    name: ClassVar[str] = "counter"
    version: ClassVar[str] = "1"
    default_max_turns: ClassVar[int] = 6
    has_privileged: ClassVar[bool] = True
    max_action_chars: ClassVar[int] = 64

    def __init__(self, *, slow_start_s: float = 0.0, **options: Any):
        super().__init__(**options)
        time.sleep(slow_start_s)

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        return TASKS if split == "test" else ()

    def splits(self) -> dict[str, int]:
        return {"test": len(TASKS)}

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        self._count = int(rng.integers(0, 3))
        return f"count {self._count}, reach {task['target']}", {"privileged": {"target": task["target"]}}

    def _step(self, action: str) -> Transition:
        if action == "inc":
            self._count += 1
            return Transition(f"count {self._count}", 1.0, info={"action_valid": True})
        if action.startswith("sleep "):
            time.sleep(float(action.split()[1]))
            return Transition("slept", info={"action_valid": True})
        if action == "fail":
            raise RuntimeError("the engine broke")
        if action == "crash":
            os._exit(3)
        if action == "wedge":  # catastrophic backtracking: the regex engine holds the GIL for hours
            re.match(r"(a+)+$", "a" * 64 + "b")
        if action == "finish":
            return Transition("done", 1.0, terminated=True, info={"action_valid": True, "success": True, "score": 1.0})
        return Transition("unknown action; try inc", info={"action_valid": False})

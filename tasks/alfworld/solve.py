"""Solving a drawn game with ALFWorld's planner expert (fast-downward), as ``alfworld-generate`` does."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from agentenvs.envs.alfworld.problem import build_game, game_sha256, traj_data


class Solver:
    """One engine per process; :meth:`walkthrough` returns the planner's plan, or None if unsolvable."""

    def __init__(self) -> None:
        from agentenvs.envs.alfworld.engine import AlfredEngine, cache_dir

        self.engine = AlfredEngine(expert=True)
        scratch = cache_dir() / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        self._folder = tempfile.TemporaryDirectory(prefix="solve-", dir=scratch)

    def walkthrough(self, spec: dict[str, Any]) -> list[str] | None:
        folder = Path(self._folder.name)
        (folder / "traj_data.json").write_text(json.dumps(traj_data(spec)), encoding="utf-8")
        game = build_game(spec)
        path = folder / f"{game_sha256(game)}.tw-pddl"  # content-addressed: the engine skips reloading a loaded path
        path.write_text(json.dumps(game), encoding="utf-8")
        try:
            self.engine.load(str(path))
            state = self.engine.reset()
        finally:
            path.unlink()
        if state["won"]:
            return None  # the goal already holds: not a task
        plan = list(state["extra.expert_plan"] or [])
        return plan or None

    def close(self) -> None:
        self.engine.close()
        self._folder.cleanup()

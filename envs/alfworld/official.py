"""Official ALFWorld data from a user's own download (``alfworld-download``; nothing is fetched).

The layout is ALFWorld's: ``<data>/json_2.1.1/<split>/<task dir>/<trial dir>/{game.tw-pddl,
traj_data.json}``. A task id is ``<task dir>/<trial dir>``, the task type comes from
``traj_data.json``, and, as ``AlfredTWEnv.collect_game_files`` does, movable-receptacle and sliced
tasks and games not marked solvable are left out.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentenvs.envs.alfworld.problem import TASK_TYPES
from agentenvs.errors import InvalidArgument

OFFICIAL_SPLITS = ("train", "valid_seen", "valid_unseen")


def split_root(data_dir: str | Path) -> Path:
    """The folder holding the split folders: ``<data>/json_2.1.1`` or ``<data>`` itself."""
    base = Path(data_dir).expanduser()
    for candidate in (base / "json_2.1.1", base):
        if any((candidate / split).is_dir() for split in OFFICIAL_SPLITS):
            return candidate
    raise InvalidArgument(
        f"no ALFWorld data under {base}: expected {base}/json_2.1.1/<split>/<task>/<trial>/game.tw-pddl with "
        f"splits among {list(OFFICIAL_SPLITS)}. Download it with `alfworld-download` (ALFWORLD_DATA={base}) "
        "or leave data_dir unset to play the generated panels."
    )


def official_splits(data_dir: str | Path) -> dict[str, int]:
    root = split_root(data_dir)
    return {split: len(official_tasks(str(root), split)) for split in OFFICIAL_SPLITS if (root / split).is_dir()}


@lru_cache(maxsize=16)
def official_tasks(root: str, split: str) -> tuple[dict[str, Any], ...]:
    """The playable games of one split, sorted by task id."""
    tasks = []
    for traj_path in sorted(Path(root, split).glob("*/*/traj_data.json")):
        trial = traj_path.parent
        game_path = trial / "game.tw-pddl"
        if "movable" in trial.parent.name or "Sliced" in trial.parent.name or not game_path.is_file():
            continue
        traj = json.loads(traj_path.read_text(encoding="utf-8"))
        if traj.get("task_type") not in TASK_TYPES:
            continue
        if not json.loads(game_path.read_text(encoding="utf-8")).get("solvable", False):
            continue
        params = traj["pddl_params"]
        tasks.append({
            "task_id": f"{trial.parent.name}/{trial.name}",
            "task_type": traj["task_type"],
            "params": {k: params.get(k, "") for k in ("object_target", "parent_target", "toggle_target")},
            "game_path": str(game_path),
        })  # fmt: skip
    return tuple(tasks)

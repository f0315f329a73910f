"""The random baseline: a uniformly drawn command of a fixed menu, as ``baseline_actions["random"]``.

A shell has no list of admissible actions to draw from, so the floor of the leaderboard is this menu:
list the files, read a Python file, search for a name the instruction quotes, submit a file's path,
or submit ``done``. It is played by ``baseline:random`` (privileged), one draw per step from the
episode's own generator, so a seed gives the same episode everywhere.
"""

from __future__ import annotations

import os
import re
import shlex

import numpy as np

from agentenvs.envs.shellops.tree import Tree

QUOTED = re.compile(r"`([^`\s]+)`")


def random_action(instruction: str, tree: Tree, rng: np.random.Generator) -> str:
    names = (os.fsdecode(path) for path, entry in tree.entries.items() if entry.is_file)
    files = sorted(name for name in names if name.isascii() and name.isprintable()) or ["."]
    python = [path for path in files if path.endswith(".py")] or files
    words = QUOTED.findall(instruction) or ["def"]
    choice = int(rng.integers(5))
    if choice == 0:
        return "<bash>ls -R</bash>"
    if choice == 1:
        return f"<bash>cat {shlex.quote(python[int(rng.integers(len(python)))])}</bash>"
    if choice == 2:
        return f"<bash>grep -rn {shlex.quote(words[int(rng.integers(len(words)))])} .</bash>"
    if choice == 3:
        return f"<submit>{files[int(rng.integers(len(files)))]}</submit>"
    return "<submit>done</submit>"

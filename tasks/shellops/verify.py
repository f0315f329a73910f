"""A task is kept only when its reference solution passes its verifier in the sandbox and the
untouched workspace fails it; for an edit, passing means the reference's commands left exactly the
tree the miner computed (``solution``), so two computations of the answer agree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentenvs.envs.shellops.env import parse_action
from agentenvs.envs.shellops.sandbox import Limits, Shell
from agentenvs.envs.shellops.snapshot import read_files, unpack
from agentenvs.envs.shellops.tree import read_tree
from agentenvs.envs.shellops.verifier import answer_matches, check_results
from agentenvs.envs.shellops.workspace import Workspace


def _outcome(task: dict[str, Any], snapshots: Mapping[str, bytes], actions: list[str], limits: Limits) -> bool:
    """Whether playing ``actions`` on a fresh copy of the workspace satisfies the verifier; for a
    question, the last command must also print the answer (two computations of it agree)."""
    workspace = Workspace(limits.workspace_mb, limits.workspace_inodes)
    try:
        unpack(snapshots[task["snapshot"]["sha256"]], workspace.path, workspace.uid, task["snapshot"]["sha256"])
        shell = Shell(workspace, limits)
        answer, printed = "", ""
        try:
            for action in actions:
                kind, body = parse_action(action)
                if kind == "submit":
                    answer = body
                else:
                    printed = shell.run(body).stdout.decode("utf-8", "replace")
        finally:
            shell.close()
        verifier = task["verifier"]
        if "checks" in verifier:
            digest = verifier["solution"]["sha256"]
            solution = read_files(snapshots[digest], digest)
            tree = read_tree(workspace.path, limits.workspace_mb << 20)
            return all(check_results(verifier, solution, tree, limits))
        agrees = len(actions) == 1 or answer_matches({**verifier, "match": "lines"}, printed)
        return agrees and answer_matches(verifier, answer)
    finally:
        workspace.close()


def verify(task: dict[str, Any], snapshots: Mapping[str, bytes], limits: Limits | None = None) -> str | None:
    """Why the task must be dropped, or None when it is verified; ``snapshots`` holds its snapshots by sha256."""
    limits = limits or Limits()
    if not _outcome(task, snapshots, list(task["reference"]), limits):
        return "the reference solution fails the verifier"
    if _outcome(task, snapshots, ["<submit></submit>"], limits):
        return "the untouched workspace already passes the verifier"
    return None

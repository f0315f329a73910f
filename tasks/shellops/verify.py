"""A task is kept only when its reference solution passes its verifier in the sandbox and the
untouched workspace fails it."""

from __future__ import annotations

from typing import Any

from agentenvs.envs.shellops.env import parse_action
from agentenvs.envs.shellops.sandbox import Limits, Shell
from agentenvs.envs.shellops.snapshot import unpack
from agentenvs.envs.shellops.verifier import answer_matches, passed_checks
from agentenvs.envs.shellops.workspace import Workspace


def _outcome(task: dict[str, Any], snapshot: bytes, actions: list[str], limits: Limits) -> bool:
    """Whether playing ``actions`` on a fresh copy of the workspace satisfies the verifier; for a
    question, the last command must also print the answer (two computations of it agree)."""
    workspace = Workspace(limits.workspace_mb, limits.workspace_inodes)
    try:
        unpack(snapshot, workspace.path, workspace.uid, task["snapshot"]["sha256"])
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
            return all(passed_checks(verifier, workspace, limits))
        agrees = len(actions) == 1 or answer_matches({**verifier, "match": "lines"}, printed)
        return agrees and answer_matches(verifier, answer)
    finally:
        workspace.close()


def verify(task: dict[str, Any], snapshot: bytes, limits: Limits | None = None) -> str | None:
    """Why the task must be dropped, or None when it is verified."""
    limits = limits or Limits()
    if not _outcome(task, snapshot, list(task["reference"]), limits):
        return "the reference solution fails the verifier"
    if _outcome(task, snapshot, ["<submit></submit>"], limits):
        return "the untouched workspace already passes the verifier"
    return None

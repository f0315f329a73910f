"""Task verifiers: a check of the submitted answer, or commands run in fresh read-only sandboxes.

A task's ``verifier`` is either ``{"answer": TEXT, "match": "exact" | "lines"}`` (``lines``: the same
set of non-empty lines, a leading ``./`` ignored) or ``{"checks": [{"name", "command"}, ...]}``, each
check passing when its command exits 0 in a fresh sandbox over the workspace, which it cannot change.
"""

from __future__ import annotations

from typing import Any

from agentenvs.envs.shellops.sandbox import Limits, run_once
from agentenvs.envs.shellops.workspace import Workspace


def _lines(text: str) -> list[str]:
    return sorted({line.strip().removeprefix("./") for line in text.splitlines() if line.strip()})


def answer_matches(verifier: dict[str, Any], answer: str) -> bool:
    expected = verifier["answer"]
    if verifier.get("match") == "lines":
        return _lines(answer) == _lines(expected)
    return answer.strip().removeprefix("./") == expected.strip()


def passed_checks(verifier: dict[str, Any], workspace: Workspace, limits: Limits) -> list[bool]:
    """Whether each of the task's check commands passes over the workspace as it is now."""
    return [run_once(workspace, check["command"], limits).exit_code == 0 for check in verifier["checks"]]

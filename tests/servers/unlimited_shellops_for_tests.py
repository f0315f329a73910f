"""The real ShellOps whose command limit failed, for the liveness tests of the server.

Served with ``--env shellhang=unlimited_shellops_for_tests:UnlimitedShellOps`` and this folder on ``PYTHONPATH``
(under its own name: ``shellops`` keeps its registered spec, which finds the task panels): each command's
wall-clock limit is an hour, so ``<bash>sleep 3600</bash>`` hangs its step in the real bubblewrap sandbox, as
a command whose limit fails would.
"""

from __future__ import annotations

from typing import Any

from agentenvs.envs.shellops.env import ShellOpsEnv
from agentenvs.envs.shellops.sandbox import Limits

NAME = "shellhang"
SERVE_ARG = f"{NAME}=unlimited_shellops_for_tests:UnlimitedShellOps"


class UnlimitedShellOps(ShellOpsEnv):
    """ShellOps with a command limit of an hour."""

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.limits = Limits(command_timeout_s=3600.0)

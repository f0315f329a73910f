"""ShellOps: terminal tasks in a bubblewrap sandbox, one persistent shell per episode (docs/shellops.md).

``SPEC`` is this environment's one declaration; the registry finds it without starting a sandbox.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="shellops",
    entry_point="agentenvs.envs.shellops.env:ShellOpsEnv",
    gym_id="agentenvs/ShellOps-v0",
    version="2",
    summary="shell tasks (find facts, edit files) in a bubblewrap sandbox; verified by commands",
    extra="shellops",
    max_turns=20,
    panels="agentenvs.tasks.shellops",
)

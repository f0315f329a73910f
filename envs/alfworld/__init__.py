"""ALFWorld household tasks on the real TextWorld/PDDL engine (docs/alfworld.md).

``SPEC`` is this environment's one declaration; the registry finds it without importing the engine.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="alfworld",
    entry_point="agentenvs.envs.alfworld.env:ALFWorldEnv",
    gym_id="agentenvs/ALFWorld-v0",
    version="1",
    summary="ALFWorld household tasks on the real TextWorld/PDDL engine, procedurally generated games",
    extra="alfworld",
    max_turns=50,
    panels="agentenvs.tasks.alfworld",
)

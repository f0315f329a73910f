"""ScienceWorld's 30 science tasks on the real Java engine, ``scienceworld==1.2.3`` (docs/sciworld.md).

``SPEC`` is this environment's one declaration; the registry finds it without importing the engine.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="sciworld",
    entry_point="agentenvs.envs.sciworld.env:ScienceWorldEnv",
    gym_id="agentenvs/ScienceWorld-v0",
    version="1",
    summary="ScienceWorld's 30 science tasks on the real Java engine",
    extra="sciworld",
    max_turns=200,
    panels="agentenvs.tasks.sciworld",
)

"""TextWorld's generated games (simple, coin collector, treasure hunter, cooking) as panels (docs/textworld.md).

``SPEC`` is this environment's one declaration; the registry finds it without importing the engine.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="textworld",
    entry_point="agentenvs.envs.textworld.env:TextWorldEnv",
    gym_id="agentenvs/TextWorld-v0",
    version="1",
    summary="TextWorld's generated games (simple, coin collector, treasure hunter, cooking) x 3 levels, dense score",
    extra="textworld",
    max_turns=50,
    panels="agentenvs.tasks.textworld",
)

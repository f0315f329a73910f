"""The bandit environment: K-armed Bernoulli and Gaussian bandits played in text (docs/bandit.md).

``SPEC`` is this environment's one declaration; the registry finds it without importing the engine.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="bandit",
    entry_point="agentenvs.envs.bandit.env:BanditEnv",
    gym_id="agentenvs/Bandit-v0",
    version="1",
    summary="K-armed Bernoulli and Gaussian bandits played in text; regret and best-arm metrics",
    extra=None,
    max_turns=100,
    panels="agentenvs.tasks.bandit",
    inline=True,
)

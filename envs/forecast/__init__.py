"""Forecast: questions about events that have not happened yet; the reward arrives when they resolve
(docs/forecast.md). ``SPEC`` is this environment's one declaration.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="forecast",
    entry_point="agentenvs.envs.forecast.env:ForecastEnv",
    gym_id="agentenvs/Forecast-v0",
    version="2",
    summary="forecast questions about a seeded simulated world; delayed rewards backfilled on resolution",
    extra=None,
    max_turns=8,
    panels="agentenvs.tasks.forecast",
    inline=True,
)

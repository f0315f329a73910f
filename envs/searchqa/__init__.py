"""Search-QA: Search-R1's multi-turn protocol over a local retriever (docs/searchqa.md).

``SPEC`` is this environment's one declaration; the registry finds it without starting Java.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="searchqa",
    entry_point="agentenvs.envs.searchqa.env:SearchQAEnv",
    gym_id="agentenvs/SearchQA-v0",
    version="1",
    summary="Search-R1's <search>/<answer> protocol: single-hop, bridge and comparison questions over 20k passages",
    extra="searchqa",
    max_turns=5,
    panels="agentenvs.tasks.searchqa",
)

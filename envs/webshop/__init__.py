"""WebShop: the original shopping task, reward and search engine, on a generated catalogue (docs/webshop.md).

``SPEC`` is this environment's one declaration; the registry finds it without starting Java.
"""

from __future__ import annotations

from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="webshop",
    entry_point="agentenvs.envs.webshop.env:WebShopEnv",
    gym_id="agentenvs/WebShop-v0",
    version="1",
    summary="WebShop's search-and-buy task: the original pages, Lucene BM25 search and reward, 10k generated products",
    extra="webshop",
    max_turns=15,
    panels="agentenvs.tasks.webshop",
)

"""OpenEnv: reach an ``agentenvs serve`` server with ``openenv-core``'s own client (servers/openenv.py).

The server speaks OpenEnv's WebSocket protocol at ``/openenv/{env}/ws`` beside protocol v1, so anything
built on OpenEnv's ``EnvClient`` (TRL's and SkyRL's OpenEnv examples, torchforge) works unchanged with
``base_url=f"{server}/openenv/{env}"``. ``openenv_client`` builds that client.

    with openenv_client("http://127.0.0.1:8000", "bandit") as env:
        result = env.reset(seed=3, task_id="bernoulli-k2-000")
        result = env.step({"message": "I pull pull[0]"})   # or {"action": "pull[0]"}
        result.observation["text"], result.reward, result.done
"""

from __future__ import annotations

from typing import Any

from agentenvs.integrations import require

TESTED = {"openenv-core": "0.3.0"}


def base_url(server: str, env: str) -> str:
    """The OpenEnv ``base_url`` of ``env`` on ``server`` (the client appends ``/ws``)."""
    return f"{server.rstrip('/')}/openenv/{env}"


def openenv_client(server: str, env: str, *, sync: bool = True, **options: Any) -> Any:
    """OpenEnv's ``GenericEnvClient`` for ``env`` on ``server`` (its sync wrapper unless ``sync=False``).

    OpenEnv's client sends no credentials, so it reaches servers started without ``--token``."""
    generic = require("openenv", "openenv.core.generic_client", "agentenvs.integrations.openenv")
    client = generic.GenericEnvClient(base_url=base_url(server, env), **options)
    return client.sync() if sync else client


__all__ = ["TESTED", "base_url", "openenv_client"]

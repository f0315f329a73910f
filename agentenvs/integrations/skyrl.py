"""SkyRL: our environments as skyrl-gym environments (``skyrl_gym.envs.base_text_env.BaseTextEnv``).

SkyRL's generator makes each row's environment with ``skyrl_gym.make(env_class, env_config=...,
extras=row)``, calls ``init(prompt)`` for the first chat messages, then ``step(reply)`` per turn and
reads ``observations`` (messages to append), ``reward``, ``done`` and ``metadata``. ``register_skyrl()``
registers ``agentenvs`` (any of our environments, chosen per row) with skyrl-gym; a row names its
episode in ``extras["agentenvs"]`` (an ``EpisodeRef`` as a dict, see ``dataset_rows``), and the
environment's ``env_config`` may name a server (``servers``) and constructor keywords (``env_kwargs``).
"""

from __future__ import annotations

from typing import Any

from agentenvs.integrations import EpisodeRef, episode_refs, require
from agentenvs.integrations.textenv import TextEpisode

TESTED = {"skyrl-gym": "0.4.0"}
ENV_ID = "agentenvs"

_skyrl = require("skyrl", "skyrl_gym", "agentenvs.integrations.skyrl")
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402


def _config(env_config: Any) -> dict[str, Any]:
    """SkyRL passes an OmegaConf ``DictConfig`` (or nothing); we read plain values from it."""
    if env_config is None:
        return {}
    if hasattr(env_config, "items") and not isinstance(env_config, dict):
        from omegaconf import OmegaConf

        return dict(OmegaConf.to_container(env_config, resolve=True))
    return dict(env_config)


class AgentEnvsTextEnv(BaseTextEnv):
    """One agentenvs episode behind skyrl-gym's text-environment interface."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = dict(extras or {})
        config = _config(env_config)
        raw = extras.get("agentenvs") or (extras.get("extra_info") or {}).get("agentenvs")
        if raw is None:
            raise ValueError(
                "a SkyRL row for env_class 'agentenvs' needs extras['agentenvs'] naming its episode "
                "(env, split, task_id, seed); build the rows with agentenvs.integrations.skyrl.dataset_rows(...)"
            )
        self.ref = EpisodeRef.decode(raw)
        self.episode = TextEpisode.open(
            self.ref,
            servers=config.get("servers"),
            max_turns=extras.get("max_turns", config.get("max_turns")),
            **dict(config.get("env_kwargs") or {}),
        )
        self.max_turns = int(getattr(self.episode.env, "max_turns", None) or 1)

    def init(self, prompt: list[dict[str, str]] | None = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The episode's first messages (system: the instructions, user: the first observation); the
        row's own prompt is replaced, since the environment renders the task."""
        system, observation, info = self.episode.reset()
        self.turns = 0
        self.max_turns = int(getattr(self.episode.env, "max_turns", None) or self.max_turns)
        return [{"role": "system", "content": system}, {"role": "user", "content": observation}], info

    def step(self, action: str) -> BaseTextEnvStepOutput:
        result = self.episode.step(action)
        self.turns = self.episode.turns
        observations = [] if result.done else [{"role": "user", "content": result.observation}]
        return BaseTextEnvStepOutput(
            observations=observations,
            reward=result.reward,
            done=result.done,
            metadata=result.info,
            postprocessed_action=result.action,
        )

    def get_metrics(self) -> dict[str, Any]:
        return self.episode.metrics()

    def close(self) -> None:
        self.episode.close()


def register_skyrl(env_id: str = ENV_ID) -> str:
    """Register ``AgentEnvsTextEnv`` with skyrl-gym under ``env_id`` (idempotent); returns the id."""
    from skyrl_gym.envs.registration import registry

    if env_id not in registry:
        _skyrl.register(id=env_id, entry_point=f"{__name__}:AgentEnvsTextEnv")
    return env_id


def dataset_rows(env: str, n: int, *, split: str | None = None, seed: int = 0, env_kwargs: Any = None) -> list[dict]:
    """``n`` rows in SkyRL's dataset layout (``prompt``, ``env_class``, the episode in ``agentenvs``)."""
    rows = []
    for ref in episode_refs(env, n, split=split, seed=seed, env_kwargs=env_kwargs):
        rows.append(
            {"prompt": [{"role": "user", "content": ref.encode()}], "env_class": ENV_ID, "agentenvs": ref.to_dict()}
        )
    return rows


__all__ = ["ENV_ID", "TESTED", "AgentEnvsTextEnv", "dataset_rows", "register_skyrl"]

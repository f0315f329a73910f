"""Adapters that let other RL trainers drive agentenvs environments (docs/integrations.md).

One thin module per trainer, each importing its trainer only when used:

- ``trl``: ``EnvRollout``, a ``rollout_func`` for TRL's ``GRPOTrainer`` (multi-turn, env tokens masked).
- ``verl``: ``AgentEnvsAgentLoop``, a verl ``AgentLoopBase`` registered as ``agentenvs``.
- ``skyrl``: ``AgentEnvsTextEnv``, a skyrl-gym ``BaseTextEnv``; ``register_skyrl()`` names it in skyrl-gym.
- ``openrlhf``: ``AgentInstance`` / ``AgentExecutor`` for ``--agent_func_path`` (multi-turn mode).
- ``openenv``: ``servers.openenv``'s WebSocket route speaks OpenEnv's protocol; ``openenv_client()``.

Shared here: the missing-extra error and the episode reference a trainer's dataset row carries.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

from agentenvs.errors import InvalidArgument, MissingDependency

REF_PREFIX = "agentenvs:"


def require(extra: str, module: str, what: str) -> Any:
    """Import ``module`` or raise an error that names the extra installing it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"{what} needs the {module.split('.')[0]!r} package, which is not installed: "
            f"pip install 'agentenvs[{extra}]' (docs/integrations.md lists the versions tested)"
        ) from exc


@dataclass(frozen=True)
class EpisodeRef:
    """Which episode a trainer's dataset row stands for: environment, split, task and seed.

    Trainers hand their rollout hooks only the prompt (TRL) or a row's fields (verl, OpenRLHF); the
    reference travels in that place as ``agentenvs:{json}`` so the hook can reset the right episode.
    """

    env: str
    split: str
    task_id: str | None
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env, "split": self.split, "task_id": self.task_id, "seed": self.seed}

    def encode(self) -> str:
        return REF_PREFIX + json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: Any) -> EpisodeRef:
        if isinstance(text, dict):
            return cls(str(text["env"]), str(text["split"]), text.get("task_id"), int(text["seed"]))
        if not isinstance(text, str) or not text.startswith(REF_PREFIX):
            raise InvalidArgument(
                f"expected an episode reference 'agentenvs:{{...}}', got {str(text)[:80]!r}; build the dataset with "
                "agentenvs.integrations.episode_refs(...) (or the adapter's dataset()) so each row names its episode"
            )
        try:
            return cls.decode(json.loads(text[len(REF_PREFIX) :]))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"malformed episode reference {text[:80]!r}: {exc}") from exc

    @property
    def group_id(self) -> str:
        return f"{self.env}/{self.split}/{self.task_id or 'any'}/{self.seed}"

    def reset_options(self) -> dict[str, Any]:
        return {"split": self.split} | ({"task_id": self.task_id} if self.task_id else {})


def episode_refs(
    env: str, n: int, *, split: str | None = None, seed: int = 0, env_kwargs: Any = None
) -> list[EpisodeRef]:
    """``n`` episode references of ``env``'s ``split``: tasks shuffled by ``seed`` and cycled, one seed each."""
    import agentenvs
    from agentenvs.rollout.driver import plan_episodes, task_ids

    local = agentenvs.make(env, **dict(env_kwargs or {}))
    try:
        split = split or local.describe().get("default_split") or "train"
        tasks = task_ids(env, split, local)
    finally:
        local.close()
    specs = plan_episodes(env, split, n, 1, seed=seed, tasks=tasks, shuffle=True)
    return [EpisodeRef(env, split, spec.task_id, spec.seed) for spec in specs]


__all__ = ["EpisodeRef", "episode_refs", "require"]

"""One episode as text in, text out: what SkyRL, OpenRLHF and verl's agent loop step on.

Those trainers generate the model's reply themselves and hand the adapter a string; ``TextEpisode``
resets the referenced episode (in-process or as a server session), finds the action in the reply with
the environment's own ``extract_action`` (as our driver does: no action found steps with ``""``, which
the environment scores as invalid), steps, and keeps the return, turns and the last info.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentenvs.integrations import EpisodeRef
from agentenvs.rollout.prompting import system_prompt
from agentenvs.rollout.records import step_info


def open_env(name: str, servers: Any = None, **kwargs: Any) -> Any:
    """An environment: in-process (``servers`` None), a session on a server URL, a list of URLs (or one
    comma-separated string of them, as an environment variable gives), or a pool."""
    import agentenvs

    if servers is None:
        return agentenvs.make(name, **kwargs)
    if hasattr(servers, "make"):
        return servers.make(name, **kwargs)
    if isinstance(servers, str) and "," not in servers:
        return agentenvs.connect(servers).make(name, **kwargs)
    if isinstance(servers, str):
        servers = [url.strip() for url in servers.split(",") if url.strip()]
    from agentenvs.client import EnvPool

    return EnvPool(list(servers)).make(name, **kwargs)


@dataclass
class StepResult:
    """One step in the form text trainers want."""

    observation: str
    reward: float
    done: bool
    action: str
    """The action found in the reply ("" when none was found)."""
    info: dict[str, Any]
    """The step-record subset of the environment's info (``score``, ``success``, ``action_valid``...)."""


@dataclass
class TextEpisode:
    """An environment playing one referenced episode from model replies."""

    env: Any
    ref: EpisodeRef
    turns: int = 0
    return_: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(
        cls, ref: EpisodeRef, *, servers: Any = None, max_turns: int | None = None, **env_kwargs: Any
    ) -> TextEpisode:
        if max_turns is not None:
            env_kwargs["max_turns"] = max_turns
        return cls(open_env(ref.env, servers, **env_kwargs), ref)

    def reset(self) -> tuple[str, str, dict[str, Any]]:
        """Reset to the referenced task and seed: (system prompt, first observation, info)."""
        observation, info = self.env.reset(seed=self.ref.seed, options=self.ref.reset_options())
        self.turns, self.return_, self.done = 0, 0.0, False
        self.info = step_info(info) | {"task_id": info.get("task_id", self.ref.task_id)}
        return system_prompt(self.env.describe()), observation, self.info

    def step(self, reply: str) -> StepResult:
        """Step on the action found in ``reply``."""
        found = self.env.extract_action(reply)
        action = found.action if found else ""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.return_ += float(reward)
        self.done = bool(terminated or truncated)
        self.info = step_info(info)
        return StepResult(observation, float(reward), self.done, action, self.info)

    def metrics(self) -> dict[str, float]:
        """The episode's outcome as numbers: return, score, success, turns."""
        return {
            "return": self.return_,
            "score": float(self.info.get("score", 0.0)),
            "success": float(bool(self.info.get("success", False))),
            "turns": float(self.turns),
        }

    def close(self) -> None:
        self.env.close()


def local_generate(policy: Any, prompt_ids: list[int], seed: int, overrides: dict[str, Any]) -> Any:
    """One generation of an in-process policy with a trainer's sampling values (None keeps the policy's).

    The CPU stand-ins for verl's and OpenRLHF's vLLM engines both answer through this."""
    from dataclasses import replace

    base = policy.sampling_settings
    given = {key: overrides.get(key) for key in ("temperature", "top_p", "max_tokens")}
    settings = replace(
        base,
        temperature=float(base.temperature if given["temperature"] is None else given["temperature"]),
        top_p=float(base.top_p if given["top_p"] is None else given["top_p"]),
        max_tokens=int(base.max_tokens if given["max_tokens"] is None else given["max_tokens"]),
    )
    return policy.generate_ids(list(prompt_ids), seed, None, settings)

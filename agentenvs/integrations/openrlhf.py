"""OpenRLHF: the agent file its multi-turn mode loads (``--train.agent_func_path``, OpenRLHF 0.11).

OpenRLHF's rollout actor executes the file, checks that its ``AgentExecutor`` subclasses
``AgentExecutorBase``, builds it with no arguments and awaits ``execute(prompt, label, sampling_params,
max_length, hf_tokenizer, llm_engine)`` per sample. Its ``MultiTurnAgentExecutor`` then calls our
``AgentInstance``: ``reset`` returns the episode's first turn rendered with the chat template, each
``step`` plays the sampled text and returns the reward and the next user turn as text
(``environment_feedback``), which OpenRLHF tokenizes and leaves out of the action mask.

This module is that file: ``python -m agentenvs.integrations.openrlhf`` prints its path. The dataset's
``label`` names the episode (``dataset_rows`` writes it); the rollout workers read where to play
from the environment: ``AGENTENVS_SERVERS`` (comma-separated server URLs; unset plays in-process),
``AGENTENVS_ENV_KWARGS`` (JSON constructor keywords), ``AGENTENVS_MAX_TURNS``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from typing import Any

from agentenvs.integrations import EpisodeRef, episode_refs, require
from agentenvs.integrations.textenv import TextEpisode, local_generate
from agentenvs.rollout.tokens import ChatTokens

TESTED = {"openrlhf": "0.11.0"}

_agent = require("openrlhf", "openrlhf.utils.agent", "agentenvs.integrations.openrlhf")


class _Sample:
    """What one ``execute`` call knows that OpenRLHF does not hand the agent instance.

    A plain class: OpenRLHF executes this file outside ``sys.modules``, where dataclasses fail."""

    def __init__(self, chat: ChatTokens):
        self.chat = chat
        self.last_ids: list[int] = []
        """The token ids of the latest generation (its end-of-turn token decides the template's suffix)."""
        self.episode: TextEpisode | None = None
        """Closed when the sample ends, also when OpenRLHF stops early (its length budget spent)."""


_SAMPLE: contextvars.ContextVar[_Sample] = contextvars.ContextVar("agentenvs_openrlhf_sample")


class _RecordingEngine:
    """OpenRLHF's engine, passing through, keeping each generation's ids for the agent instance."""

    def __init__(self, engine: Any, sample: _Sample):
        self.engine, self.sample = engine, sample

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        output = await self.engine.generate(prompt_token_ids, sampling_params, **kwargs)
        self.sample.last_ids = list(output.outputs[0].token_ids)
        return output


def settings() -> dict[str, Any]:
    """Where the rollout workers play, from their environment variables."""
    servers = [url for url in os.environ.get("AGENTENVS_SERVERS", "").split(",") if url.strip()]
    turns = os.environ.get("AGENTENVS_MAX_TURNS")
    try:
        env_kwargs = json.loads(os.environ.get("AGENTENVS_ENV_KWARGS") or "{}")
    except ValueError as exc:
        raise ValueError(f"AGENTENVS_ENV_KWARGS must be a JSON object of constructor keywords: {exc}") from exc
    return {"servers": servers or None, "max_turns": int(turns) if turns else None, "env_kwargs": env_kwargs}


class AgentInstance(_agent.AgentInstanceBase):
    """One agentenvs episode per OpenRLHF sample."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.episode: TextEpisode | None = None
        self.system = ""

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        ref = EpisodeRef.decode(states.get("label"))
        config = settings()
        self.episode = await asyncio.to_thread(
            TextEpisode.open, ref, servers=config["servers"], max_turns=config["max_turns"], **config["env_kwargs"]
        )
        _SAMPLE.get().episode = self.episode
        self.system, observation, _ = await asyncio.to_thread(self.episode.reset)
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": observation}]
        return {"observation": _SAMPLE.get().chat.render(messages, add_generation_prompt=True)}

    async def step(self, states: dict, **kwargs: Any) -> dict:
        import torch

        sample, episode = _SAMPLE.get(), self.episode
        result = await asyncio.to_thread(episode.step, states["action_text"])
        feedback = ""
        if not result.done:
            suffix = sample.chat.next_turn_ids(self.system, result.observation, sample.last_ids)
            feedback = sample.chat.tokenizer.decode(suffix, skip_special_tokens=False)
        return {
            "rewards": torch.tensor(result.reward),
            "environment_feedback": feedback,
            "done": result.done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {f"agentenvs/{key}": value for key, value in episode.metrics().items()},
        }


class AgentExecutor(_agent.MultiTurnAgentExecutor):
    """OpenRLHF's multi-turn executor over ``AgentInstance``, handing it the tokenizer and generated ids."""

    def __init__(self) -> None:
        super().__init__(AgentInstance)

    async def execute(
        self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None
    ) -> dict:
        sample = _Sample(ChatTokens(hf_tokenizer))
        token = _SAMPLE.set(sample)
        try:
            engine = _RecordingEngine(llm_engine, sample)
            return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, engine, images)
        finally:
            _SAMPLE.reset(token)
            if sample.episode is not None:
                await asyncio.to_thread(sample.episode.close)


class LocalEngine:
    """OpenRLHF's vLLM engine answered by an in-process model (our ``TransformersPolicy``): CPU runs, tests.

    OpenRLHF asks each turn for the whole remaining budget; the policy's own ``max_tokens`` caps a turn,
    as a stop string would with vLLM."""

    def __init__(self, policy: Any, seed: int = 0):
        self.policy, self.seed, self.calls = policy, seed, 0

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, **_: Any) -> Any:
        from types import SimpleNamespace

        self.calls += 1
        overrides = {key: getattr(sampling_params, key, None) for key in ("temperature", "top_p")}
        overrides["max_tokens"] = min(sampling_params.max_tokens, self.policy.sampling_settings.max_tokens)
        out = await asyncio.to_thread(local_generate, self.policy, prompt_token_ids, self.seed + self.calls, overrides)
        text = self.policy.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        logprobs = [{i: SimpleNamespace(logprob=p)} for i, p in zip(out.token_ids, out.logprobs or [], strict=False)]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=out.token_ids, text=text, logprobs=logprobs)])


def dataset_rows(env: str, n: int, *, split: str | None = None, seed: int = 0, env_kwargs: Any = None) -> list[dict]:
    """``n`` rows for OpenRLHF's prompt dataset (``--data.input_key prompt --data.label_key label``)."""
    return [
        {"prompt": ref.encode(), "label": ref.encode()}
        for ref in episode_refs(env, n, split=split, seed=seed, env_kwargs=env_kwargs)
    ]


__all__ = ["TESTED", "AgentExecutor", "AgentInstance", "LocalEngine", "dataset_rows", "settings"]

if __name__ == "__main__":
    print(os.path.abspath(__file__))

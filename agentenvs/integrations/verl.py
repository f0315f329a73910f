"""verl: an agent loop (``verl.experimental.agent_loop.AgentLoopBase``, verl 0.9) that plays our episodes.

verl's ``AgentLoopWorker`` instantiates the loop named by a row's ``agent_name`` (or the config's
``default_agent_loop``) and awaits ``run(sampling_params, **row_fields)``, which must return an
``AgentLoopOutput``: ``prompt_ids``, ``response_ids`` (every turn's sampled ids and the environment's
ids between them), ``response_mask`` (1 sampled, 0 environment), ``response_logprobs`` and, here, the
episode return as ``reward_score``. ``AgentEnvsAgentLoop`` resets the row's episode (``extra_info.agentenvs``
or a top-level ``agentenvs`` field, an ``EpisodeRef``), generates each turn through verl's
``server_manager.generate`` (token ids in and out, so nothing is re-tokenized), steps the environment
(in-process or a ``RemoteEnv`` session: ``servers``) and appends the next observation with our
``ChatTokens`` (the chat template's ids for a user turn, no re-rendering of earlier turns).

``LocalServerManager`` stands in for verl's vLLM server manager with our ``TransformersPolicy``, to run
the loop on a CPU (tests, debugging). The GPU recipe is in docs/integrations.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import uuid4

from agentenvs.integrations import EpisodeRef, require
from agentenvs.integrations.textenv import TextEpisode, local_generate
from agentenvs.rollout.tokens import ChatTokens

TESTED = {"verl": "0.9.0", "ray": "2.60.0", "tensordict": "0.10.0", "hydra-core": "1.3.8"}
AGENT_NAME = "agentenvs"

_agent_loop = require("verl", "verl.experimental.agent_loop.agent_loop", "agentenvs.integrations.verl")
from verl.workers.rollout.replica import TokenOutput  # noqa: E402


def row_ref(fields: dict[str, Any]) -> EpisodeRef:
    """The episode a verl row names: ``agentenvs`` at the top level or in ``extra_info``."""
    raw = fields.get("agentenvs") or (fields.get("extra_info") or {}).get("agentenvs")
    if raw is None:
        raise ValueError(
            "a verl row for the 'agentenvs' agent loop needs an 'agentenvs' field (or extra_info.agentenvs) naming "
            "its episode; build the parquet rows with agentenvs.integrations.verl.dataset_rows(...)"
        )
    return EpisodeRef.decode(raw)


@_agent_loop.register(AGENT_NAME)
class AgentEnvsAgentLoop(_agent_loop.AgentLoopBase):
    """Multi-turn episodes of any agentenvs environment as verl trajectories."""

    def __init__(
        self,
        *args: Any,
        servers: Any = None,
        env_kwargs: dict[str, Any] | None = None,
        max_turns: int | None = None,
        max_tokens_per_turn: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.servers = list(servers) if servers is not None and not isinstance(servers, str) else servers
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.max_tokens_per_turn = max_tokens_per_turn
        self.response_length = int(self.rollout_config.response_length)
        self.chat = ChatTokens(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        episode = await asyncio.to_thread(
            TextEpisode.open, row_ref(kwargs), servers=self.servers, max_turns=self.max_turns, **self.env_kwargs
        )
        try:
            return await self._play(episode, dict(sampling_params))
        finally:
            await asyncio.to_thread(episode.close)

    async def _play(self, episode: TextEpisode, sampling: dict[str, Any]) -> Any:
        system, observation, _ = await asyncio.to_thread(episode.reset)
        prompt_ids = self.chat.prompt_ids(
            [{"role": "system", "content": system}, {"role": "user", "content": observation}]
        )
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        rewards: list[float] = []
        logprobs_known = bool(sampling.get("logprobs"))
        request_id = uuid4().hex
        while not episode.done and len(ids) < self.response_length:
            budget = self.response_length - len(ids)
            sampling["max_tokens"] = min(budget, self.max_tokens_per_turn or budget)
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids + ids, sampling_params=sampling
            )
            ids += out.token_ids
            mask += [1] * len(out.token_ids)
            logprobs_known = logprobs_known and bool(out.log_probs)
            logprobs += list(out.log_probs) if out.log_probs else [0.0] * len(out.token_ids)
            result = await asyncio.to_thread(episode.step, self.chat.response_text(out.token_ids))
            rewards.append(result.reward)
            if not result.done:
                suffix = self.chat.next_turn_ids(system, result.observation, out.token_ids)
                ids, mask, logprobs = ids + suffix, mask + [0] * len(suffix), logprobs + [0.0] * len(suffix)
        n = self.response_length
        return _agent_loop.AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=ids[:n],
            response_mask=mask[:n],
            response_logprobs=logprobs[:n] if logprobs_known else None,  # never zeros standing in for a gap
            reward_score=episode.return_,
            num_turns=2 * episode.turns + 1,
            metrics={},
            extra_fields={"turn_scores": rewards, "tool_rewards": [], "agentenvs": episode.metrics()},
        )


class LocalServerManager:
    """verl's ``server_manager.generate`` answered by an in-process model (our ``TransformersPolicy``)."""

    def __init__(self, policy: Any, seed: int = 0):
        self.policy = policy
        self.calls = 0
        self.seed = seed

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        self.calls += 1
        out = await asyncio.to_thread(local_generate, self.policy, prompt_ids, self.seed + self.calls, sampling_params)
        return TokenOutput(token_ids=out.token_ids, log_probs=out.logprobs, stop_reason="completed")


def dataset_rows(env: str, n: int, *, split: str | None = None, seed: int = 0, env_kwargs: Any = None) -> list[dict]:
    """``n`` rows for verl's ``RLHFDataset`` parquet: a placeholder prompt, the agent name, the episode."""
    from agentenvs.integrations import episode_refs

    rows = []
    for ref in episode_refs(env, n, split=split, seed=seed, env_kwargs=env_kwargs):
        rows.append(
            {
                "prompt": [{"role": "user", "content": ref.encode()}],
                "agent_name": AGENT_NAME,
                "data_source": f"agentenvs/{env}",
                "extra_info": {"agentenvs": ref.to_dict()},
            }
        )
    return rows


CONFIG = Path(__file__).with_name("verl_agent_loop.yaml")
"""The agent loop config verl's ``agent_loop_config_path`` loads (registers ``agentenvs`` in the workers)."""

__all__ = ["AGENT_NAME", "CONFIG", "TESTED", "AgentEnvsAgentLoop", "LocalServerManager", "dataset_rows", "row_ref"]

if __name__ == "__main__":
    print(CONFIG)

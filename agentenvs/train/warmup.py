"""Warm-up by behaviour cloning: supervised training on a scripted policy's actions before RL.

A model built from scratch cannot yet write an action the environment parses, so every reward is 0
and GRPO has nothing to compare. Cloning a scripted player (by default the uniform random one, which
knows only the admissible actions) teaches the format and nothing about which action is better; what
the model gains after that comes from the reward. Prompts are built exactly as the rollout policy
builds them (system prompt, history, chat template), so the format carries over.
"""

from __future__ import annotations

import time
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.train.batching import Row, collate, response_logits, token_logprobs
from agentenvs.train.losses import aggregate


def cloning_rows(records: list[EpisodeRecord], tokenizer: Any, description: dict[str, Any], history: str) -> list[Row]:
    """One row per turn: the policy's prompt for that observation, and the scripted action as the answer."""
    from agentenvs.rollout.prompting import Conversation, HistoryConfig, system_prompt
    from agentenvs.rollout.tokens import ChatTokens

    chat = ChatTokens(tokenizer)
    rows = []
    for index, record in enumerate(records):
        conversation = Conversation(system_prompt(description), HistoryConfig.parse(history))
        for turn, step in enumerate(record.steps):
            prompt = chat.prompt_ids(conversation.messages(step.observation))
            response = chat.encode(step.response) + chat.stop_token_ids[:1]
            rows.append(Row(prompt, response, None, [1] * len(response), 1.0, index, turn))
            conversation.add(step.observation, step.response)
    if not rows:
        raise InvalidArgument("the scripted policy produced no turns to clone")
    return rows


def behaviour_clone(trainer: Any) -> dict[str, float]:
    """Run the warm-up of ``trainer.config.warmup`` on ``trainer.model``; returns its metrics."""
    import torch

    from agentenvs.rollout.driver import RolloutConfig, plan_episodes, run_rollouts, task_ids
    from agentenvs.rollout.factory import make_policy
    from agentenvs.seeding import derive_seed

    config = trainer.config
    warm = config.warmup
    started = time.perf_counter()
    env = trainer.local_env()
    description = env.describe()
    split = config.env.split
    episodes = plan_episodes(
        config.env.name,
        split,
        warm.episodes,
        1,
        seed=derive_seed("warmup", config.run.seed) % (2**31),
        tasks=config.env.tasks or task_ids(config.env.name, split, env),
        shuffle=True,
    )
    scripted = make_policy(warm.policy, seed=config.run.seed)
    records = run_rollouts(
        config.env.name,
        scripted,
        episodes=episodes,
        config=RolloutConfig(max_turns=config.env.max_turns, env_kwargs=dict(config.env.kwargs), progress=False),
    )
    rows = cloning_rows(records, trainer.tokenizer, description, config.rollout.history)
    model = trainer.model
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=warm.lr)
    generator = torch.Generator().manual_seed(derive_seed("warmup-batches", config.run.seed) % (2**63))
    model.train()
    loss_value = float("nan")
    for _ in range(warm.steps):
        picks = torch.randint(len(rows), (warm.batch_size,), generator=generator).tolist()
        batch = collate([rows[i] for i in picks], trainer.tokenizer.pad_token_id)
        logprobs = token_logprobs(response_logits(model, batch), batch.targets)
        loss = -aggregate(logprobs, batch.response_mask, "token-mean")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    model.eval()
    return {"warmup/loss": loss_value, "warmup/rows": len(rows), "warmup/s": time.perf_counter() - started}

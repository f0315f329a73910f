"""Play referenced episodes with a model policy and cut each one into (prompt, completion, masks).

Every adapter whose trainer wants token ids (TRL, and the same split is verl's and OpenRLHF's) uses
this: the first turn's prompt is the trainer's prompt; everything after it (each sampled response
and the environment's templated observations between them) is the completion, with a mask that is 1
on sampled ids and 0 on environment ids, and the sampled logprobs (0.0 on environment ids; None when
the backend gave none for some turn).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.integrations import EpisodeRef
from agentenvs.rollout.records import EpisodeRecord


@dataclass
class Completion:
    """One episode in a trainer's (prompt, completion) form."""

    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    """1 on ids the policy sampled, 0 on the environment's ids (observations, chat template)."""
    logprobs: list[float] | None
    """None when the backend returned no logprobs for some turn."""
    record: EpisodeRecord


def specs_for(refs: Sequence[EpisodeRef]) -> list[Any]:
    """Driver episode specs for ``refs``; repeats of one reference become members of one group."""
    from agentenvs.rollout.driver import EpisodeSpec

    members: Counter[EpisodeRef] = Counter()
    specs = []
    for ref in refs:
        member = members[ref]
        members[ref] += 1
        specs.append(EpisodeSpec(ref.task_id, ref.split, ref.seed, ref.group_id, f"{ref.group_id}/{member}", member))
    return specs


def play(
    refs: Sequence[EpisodeRef],
    policy: Any,
    *,
    servers: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    max_turns: int | None = None,
    concurrency: int = 8,
    time_limit_s: float | None = None,
) -> list[EpisodeRecord]:
    """One episode per reference (in order), in-process or on ``servers`` (URLs or an ``EnvPool``)."""
    from agentenvs.rollout.driver import RolloutConfig, run_rollouts

    envs = {ref.env for ref in refs}
    if len(envs) != 1:
        raise InvalidArgument(f"one batch plays one environment; these references name {sorted(envs)}")
    config = RolloutConfig(
        concurrency=concurrency,
        time_limit_s=time_limit_s,
        max_turns=max_turns,
        env_kwargs=dict(env_kwargs or {}),
        progress=False,
    )
    return run_rollouts(envs.pop(), policy, episodes=specs_for(refs), servers=servers, config=config)


def completion(record: EpisodeRecord, fallback_id: int) -> Completion:
    """``record`` split after its first prompt; an episode with no sampled turn gets one masked ``fallback_id``."""
    tokens = record.tokens
    if tokens is None or tokens.num_turns == 0:
        return Completion([fallback_id], [fallback_id], [0], [0.0], record)
    sequence = tokens.sequence()
    cut = len(tokens.prompt_ids[0])
    return Completion(
        prompt_ids=sequence.ids[:cut],
        completion_ids=sequence.ids[cut:],
        mask=sequence.loss_mask[cut:],
        logprobs=sequence.logprobs[cut:],
        record=record,
    )

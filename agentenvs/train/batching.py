"""From episode records to training rows and padded tensors.

One row per turn (verl-agent's layout): the whole context the model saw at that turn as the prompt,
then the ids it sampled. Only response ids are trained on (the loss mask); the context, which holds
the observations and earlier turns, is masked. Every response id of a turn carries that turn's
advantage, so multi-turn episodes train on every turn with its episode (GRPO) or step (GiGPO) value.

Tensors are laid out so every row's response starts at the same column: prompts left-padded to the
longest prompt, responses right-padded to the longest response. The logits of the response ids are
then the last ``R + 1`` positions, which ``logits_to_keep`` computes without the prompt's logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord


@dataclass
class Row:
    """One turn of one episode, ready to train on."""

    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float] | None
    """The sampler's logprobs of the response, where they describe the distribution the trainer models
    (see :func:`behaviour_logprobs`); None where the backend gave none or they are of another kind."""
    action_mask: list[int]
    advantage: float
    episode: int
    """Index of the episode in the batch."""
    turn: int
    off_policy: bool = False
    """Sampled by an earlier policy than the one being trained (a replayed episode)."""
    old_logprobs: list[float] | None = None
    """The trainer's own logprobs before the update (set when epochs or mini-batches exceed one)."""
    ref_logprobs: list[float] | None = None
    entropy: list[float] | None = None
    """The entropy of the trainer's policy before the update at each response token (ActFocus)."""
    weights: list[float] | None = None
    """Per-token loss weights, set once per mini-batch (``agentenvs.train.weights``)."""


def behaviour_logprobs(record: EpisodeRecord, turn: int, temperature: float) -> list[float] | None:
    """The sampler's logprobs of ``turn`` if they are of the distribution the trainer models at
    ``temperature``: ``processed`` logprobs (after temperature) always, ``raw`` ones only at temperature 1."""
    tokens = record.tokens
    values = None if tokens is None else tokens.response_logprobs[turn]
    if values is None:
        return None
    if tokens.logprob_kind == "processed" or (tokens.logprob_kind == "raw" and temperature == 1.0):
        return list(values)
    return None


def rows_from_records(
    records: Sequence[EpisodeRecord],
    advantages: Sequence[Sequence[float]],
    keep: Sequence[bool] | None = None,
    *,
    temperature: float = 1.0,
    off_policy: Sequence[bool] | None = None,
) -> list[Row]:
    """The training rows of the kept records; turns without sampled ids are skipped. ``off_policy`` flags
    the records an earlier policy sampled (replay); ``temperature`` is the one the trainer models."""
    rows = []
    for index, (record, per_turn) in enumerate(zip(records, advantages, strict=True)):
        if keep is not None and not keep[index]:
            continue
        if record.tokens is None:
            raise InvalidArgument(
                f"episode {record.episode_id} has no token ids; train with a policy that records them "
                "(TransformersPolicy, or OpenAIPolicy in completions mode)"
            )
        tokens = record.tokens
        for turn in range(min(tokens.num_turns, len(per_turn))):
            sample = tokens.turn_sample(turn)
            if not sample.response_ids:
                continue
            rows.append(
                Row(
                    prompt_ids=sample.prompt_ids,
                    response_ids=sample.response_ids,
                    rollout_logprobs=behaviour_logprobs(record, turn, temperature),
                    action_mask=sample.action_mask,
                    advantage=float(per_turn[turn]),
                    episode=index,
                    turn=turn,
                    off_policy=bool(off_policy and off_policy[index]),
                )
            )
    return rows


@dataclass
class Batch:
    """Padded tensors of a list of rows (see the module docstring for the layout)."""

    input_ids: object
    attention_mask: object
    position_ids: object
    targets: object
    """``[B, R]``: the response ids."""
    response_mask: object
    """``[B, R]``: 1 on real response ids."""
    action_mask: object
    advantages: object
    rollout_logprobs: object
    """``[B, R]``: the sampler's logprobs (0 where a row has none; see ``has_rollout_logprobs``)."""
    has_rollout_logprobs: object
    """``[B]``: 1.0 for rows whose sampler logprobs are known."""
    response_width: int

    @property
    def num_tokens(self) -> float:
        return float(self.response_mask.sum())


def collate(rows: Sequence[Row], pad_id: int) -> Batch:
    """Pad ``rows`` into one :class:`Batch` (torch tensors)."""
    import torch

    if not rows:
        raise InvalidArgument("cannot collate an empty list of rows")
    width_p = max(len(r.prompt_ids) for r in rows)
    width_r = max(len(r.response_ids) for r in rows)
    n = len(rows)
    input_ids = torch.full((n, width_p + width_r), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width_p + width_r), dtype=torch.long)
    response_mask = torch.zeros((n, width_r), dtype=torch.float32)
    action_mask = torch.zeros((n, width_r), dtype=torch.float32)
    rollout_lp = torch.zeros((n, width_r), dtype=torch.float32)
    known = torch.tensor([float(r.rollout_logprobs is not None) for r in rows])
    for i, row in enumerate(rows):
        p, r = len(row.prompt_ids), len(row.response_ids)
        input_ids[i, width_p - p : width_p] = torch.tensor(row.prompt_ids, dtype=torch.long)
        input_ids[i, width_p : width_p + r] = torch.tensor(row.response_ids, dtype=torch.long)
        attention[i, width_p - p : width_p + r] = 1
        response_mask[i, :r] = 1.0
        action_mask[i, :r] = torch.tensor(row.action_mask[:r], dtype=torch.float32)
        if row.rollout_logprobs is not None:
            rollout_lp[i, :r] = torch.tensor(row.rollout_logprobs[:r], dtype=torch.float32)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    advantages = torch.tensor([r.advantage for r in rows], dtype=torch.float32)[:, None] * response_mask
    return Batch(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        targets=input_ids[:, width_p:],
        response_mask=response_mask,
        action_mask=action_mask,
        advantages=advantages,
        rollout_logprobs=rollout_lp,
        has_rollout_logprobs=known,
        response_width=width_r,
    )


def response_logits(model: object, batch: Batch) -> object:
    """``[B, R, V]`` logits predicting each response id (only the last ``R + 1`` positions are computed)."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=batch.response_width + 1,
        use_cache=False,
    )
    return out.logits[:, :-1, :]


def sampling_logits(logits: object, temperature: float) -> object:
    """The logits of the distribution the sampler drew from at ``temperature`` (float32), so the trainer's
    log-probabilities, ratios and entropy are those of the policy that acted (verl divides the same way)."""
    logits = logits.float()
    return logits if temperature == 1.0 else logits / temperature


def token_logprobs(logits: object, targets: object) -> object:
    """Log-probability of each target id under ``logits`` (float32)."""
    import torch

    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i : i + size] for i in range(0, len(items), size)]

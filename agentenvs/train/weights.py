"""Per-token loss weights, fixed once per mini-batch so the micro-batch size never changes the objective.

Two kinds multiply each generated token's policy-gradient term:

- **ActFocus weights** (:func:`token_weights`): reasoning tokens get ``reasoning_weight``, action tokens
  ``1 + beta * z+`` of their uncertainty. Their z-score and their rescaling are statistics *over a set
  of tokens*; computed per micro-batch they would make a row's weight depend on which rows share its
  micro-batch. :func:`minibatch_token_weights` computes them over the whole mini-batch, before the
  micro-batch loop, from the entropy of the policy that sampled (the trainer's weights before the update).
- **Truncated importance weights** (:func:`importance_weights`): ``min(pi_old / pi_behaviour, cap)`` per
  token for rows sampled by another policy than the trainer's current one (replayed episodes, or every
  row with ``loss.importance_correction: all``), as verl's ``rollout_is`` (TIS) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentenvs.errors import InvalidArgument

EPS = 1e-6

CORRECTION_MODES = ("off_policy", "all", "none")
"""Which rows the truncated importance weight corrects: rows sampled by an earlier policy (replay), every
row (also a sampler that differs numerically, like vLLM in bf16), or none."""


def token_weights(
    loss_mask: Any,
    action_mask: Any,
    *,
    reasoning_weight: float = 1.0,
    uncertainty: Any = None,
    uncertainty_beta: float = 0.0,
    rescale: bool = True,
) -> Any:
    """ActFocus-style per-token loss weights (algorithms.md §4.4, reconstructed from the abstract).

    Reasoning tokens (generated, outside the action span) get ``reasoning_weight``; action tokens get
    ``1 + beta * z+`` where ``z+`` is the positive part of the z-scored ``uncertainty`` (per-token
    entropy) over the action tokens. With ``rescale`` the weights are scaled so that their sum over
    generated tokens equals the number of generated tokens, which keeps the loss scale. The statistics
    run over every token passed in: pass a whole mini-batch. Works on numpy arrays and torch tensors.
    """
    loss = loss_mask * 1.0
    action = action_mask * loss
    reasoning = loss - action
    action_w = action * 1.0
    if uncertainty is not None and uncertainty_beta:
        count = action.sum()
        if float(count) > 0:
            mean = (uncertainty * action).sum() / count
            std = (((uncertainty - mean) ** 2) * action).sum() / count
            z = (uncertainty - mean) / (std**0.5 + EPS)
            action_w = action * (1.0 + uncertainty_beta * (z + abs(z)) / 2)
    weights = reasoning_weight * reasoning + action_w
    if rescale:
        total = weights.sum()
        if float(total) > 0:
            weights = weights * (loss.sum() / total)
    return weights


def minibatch_token_weights(
    action_masks: Sequence[Sequence[int]],
    entropies: Sequence[Sequence[float]] | None,
    *,
    reasoning_weight: float,
    uncertainty_beta: float,
) -> list[list[float]]:
    """ActFocus weights of every response token of a mini-batch's rows (one list per row), with the
    z-score and rescaling over the whole mini-batch. ``entropies`` are needed when ``uncertainty_beta``."""
    import torch

    if uncertainty_beta and entropies is None:
        raise InvalidArgument("uncertainty-weighted tokens need the sampling policy's entropy of every row")
    width = max((len(m) for m in action_masks), default=0)
    loss = torch.zeros((len(action_masks), width))
    action = torch.zeros_like(loss)
    entropy = torch.zeros_like(loss)
    for i, mask in enumerate(action_masks):
        loss[i, : len(mask)] = 1.0
        action[i, : len(mask)] = torch.tensor(mask, dtype=torch.float32)
        if entropies is not None:
            entropy[i, : len(mask)] = torch.tensor(entropies[i], dtype=torch.float32)
    weights = token_weights(
        loss,
        action,
        reasoning_weight=reasoning_weight,
        uncertainty=entropy if uncertainty_beta else None,
        uncertainty_beta=uncertainty_beta,
    )
    return [weights[i, : len(mask)].tolist() for i, mask in enumerate(action_masks)]


def importance_weights(old_logprobs: Any, behaviour_logprobs: Any, cap: float) -> Any:
    """Truncated importance weights ``min(exp(old - behaviour), cap)`` per token (TIS), detached."""
    import torch

    with torch.no_grad():
        return torch.clamp(torch.exp(torch.clamp(old_logprobs - behaviour_logprobs, max=20.0)), max=cap)

"""Policy-gradient losses over token tensors (algorithms.md §4.1-4.2, verl ``core_algos``).

All tensors are ``[batch, length]`` and aligned: ``logprobs`` of the current policy, ``old_logprobs``
of the policy that sampled, per-token ``advantages``, and ``mask`` (1 on tokens the policy generated,
0 on prompt, observation and padding tokens). Aggregation turns per-token values into one number; with
gradient accumulation, pass the *whole* mini-batch's token and sequence counts (``num_tokens``,
``num_seqs``) so the micro-batch losses add up to the mini-batch loss exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentenvs.errors import InvalidArgument

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""``token-mean``: sum over all tokens / number of tokens (DAPO). ``seq-mean-token-mean``: mean over
sequences of each sequence's token mean (original GRPO). ``seq-mean-token-sum``: mean over sequences of
token sums. ``seq-mean-token-sum-norm``: token sum / a constant (Dr.GRPO: the maximum response length)."""

LOG_RATIO_LIMIT = 20.0


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    *,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
    norm_constant: float | None = None,
) -> torch.Tensor:
    """Reduce per-token ``values`` under ``mask`` by ``mode`` (see :data:`AGG_MODES`).

    ``num_tokens``/``num_seqs`` override the denominators (default: this batch's own counts);
    ``norm_constant`` is Dr.GRPO's constant (default: the tensor's length).
    """
    mask = mask.to(values.dtype)
    masked = values * mask
    if mode == "token-mean":
        denominator = mask.sum() if num_tokens is None else torch.tensor(float(num_tokens))
        return masked.sum() / denominator.clamp(min=1.0)
    seqs = float(values.shape[0]) if num_seqs is None else float(num_seqs)
    if mode == "seq-mean-token-sum":
        return masked.sum() / max(seqs, 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)
        return per_seq.sum() / max(seqs, 1.0)
    if mode == "seq-mean-token-sum-norm":
        constant = float(values.shape[-1]) if norm_constant is None else float(norm_constant)
        return masked.sum() / (constant * max(seqs, 1.0))
    raise InvalidArgument(f"unknown loss aggregation {mode!r}; choose one of {AGG_MODES}")


def ppo_clip_terms(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss with asymmetric range ``[1 - clip_low, 1 + clip_high]`` and dual clip.

    Returns ``(loss, clipped)``: ``clipped`` is 1.0 where the clipped branch (or the dual clip) set the
    value. Dual clip (``dual_clip`` = c > 1) bounds the loss of negative-advantage tokens at ``-A * c``.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise InvalidArgument(f"dual_clip must be greater than 1 (or None to disable), got {dual_clip}")
    ratio = torch.exp(torch.clamp(logprobs - old_logprobs, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    was_clipped = (clipped > unclipped).to(logprobs.dtype)
    if dual_clip is not None:
        bound = -advantages * dual_clip
        dual = (advantages < 0) & (loss > bound)
        loss = torch.where(dual, bound, loss)
        was_clipped = torch.where(dual, torch.ones_like(was_clipped), was_clipped)
    return loss, was_clipped


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref) per token, clamped as in verl's ``low_var_kl``."""
    log_ratio = torch.clamp(ref_logprobs - logprobs, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-position entropy of the softmax over the last dimension."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


@dataclass
class LossConfig:
    """The knobs of :func:`policy_loss`."""

    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float | None = 3.0
    agg: str = "token-mean"
    norm_constant: float | None = None
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    importance_correction: str = "off_policy"
    """Which rows get a truncated importance weight ``min(pi_old / pi_behaviour, importance_cap)`` against
    the sampler's recorded logprobs (verl's ``rollout_is``, TIS): ``off_policy`` (rows an earlier policy
    sampled: replayed episodes), ``all`` or ``none``."""
    importance_cap: float = 2.0
    """The truncation level of the importance weight (verl's ``rollout_is_threshold``)."""


@dataclass
class LossParts:
    """The total loss to backpropagate and detached statistics for the metrics log."""

    loss: torch.Tensor
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    approx_kl_old: float


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig,
    *,
    weights: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
) -> LossParts:
    """``L = agg(w * l_clip) + kl_coef * agg(k3) - entropy_coef * agg(H)`` over the generated tokens.

    ``weights`` are per-token loss weights (ActFocus, truncated importance weights: ``agentenvs.train.weights``).
    The statistics are means over this batch's masked tokens.
    """
    counts = {"num_tokens": num_tokens, "num_seqs": num_seqs, "norm_constant": config.norm_constant}
    terms, clipped = ppo_clip_terms(
        logprobs,
        old_logprobs,
        advantages,
        clip_low=config.clip_low,
        clip_high=config.clip_high,
        dual_clip=config.dual_clip,
    )
    if weights is not None:
        terms = terms * weights
    pg = aggregate(terms, mask, config.agg, **counts)
    loss = pg
    maskf = mask.to(logprobs.dtype)
    tokens = maskf.sum().clamp(min=1.0)
    kl_value = 0.0
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs)
        if config.kl_coef:
            loss = loss + config.kl_coef * aggregate(kl, mask, config.agg, **counts)
        kl_value = float((kl.detach() * maskf).sum() / tokens)
    entropy_value = 0.0
    if entropy is not None:
        if config.entropy_coef:
            loss = loss - config.entropy_coef * aggregate(entropy, mask, config.agg, **counts)
        entropy_value = float((entropy.detach() * maskf).sum() / tokens)
    with torch.no_grad():
        approx_kl_old = float((0.5 * (logprobs - old_logprobs) ** 2 * maskf).sum() / tokens)
        clip_fraction = float((clipped * maskf).sum() / tokens)
    return LossParts(
        loss=loss,
        pg_loss=float(pg.detach()),
        kl=kl_value,
        entropy=entropy_value,
        clip_fraction=clip_fraction,
        approx_kl_old=approx_kl_old,
    )

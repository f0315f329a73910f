"""The update half of a GRPO step: epochs of mini-batch optimizer steps over the rows of a batch.

Old log-probabilities are recomputed by the trainer's model (so a sampler that differs numerically,
like vLLM, never biases the ratio); with one epoch and one mini-batch the ratio is exactly 1 and they
come free from the same forward pass. Every log-probability is of the distribution the sampler drew
from (logits divided by ``rollout.temperature``). The reference model's log-probabilities feed the KL
term. Token weights (ActFocus, truncated importance weights) are fixed per mini-batch before its
micro-batches run, so ``micro_batch_size`` changes only memory, never the gradient. See docs/train.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.seeding import derive_seed
from agentenvs.train.batching import Batch, Row, chunks, collate, response_logits, sampling_logits, token_logprobs
from agentenvs.train.config import TrainConfig
from agentenvs.train.losses import entropy_from_logits, policy_loss
from agentenvs.train.modeling import Reference, trainable_parameters
from agentenvs.train.weights import importance_weights, minibatch_token_weights

LOGGED = ("pg", "kl_ref", "entropy", "clip_fraction", "approx_kl_old")


class PolicyUpdate:
    """Trains ``model`` with ``optimizer`` on rows of per-turn advantages (the loss of ``config.loss``)."""

    def __init__(self, model: Any, tokenizer: Any, optimizer: Any, reference: Reference | None, config: TrainConfig):
        self.model = model
        self.tokenizer = tokenizer
        self.optimizer = optimizer
        self.reference = reference
        self.config = config
        self.temperature = config.rollout.temperature
        loss = config.loss
        if loss.agg == "seq-mean-token-sum-norm" and loss.norm_constant is None:
            loss = replace(loss, norm_constant=float(config.rollout.max_tokens))
        self.loss_config = loss

    def run(self, rows: list[Row], step: int) -> dict[str, float]:
        """Epochs of mini-batch optimizer steps over ``rows``; returns token-weighted loss statistics."""
        import torch

        optim = self.config.optim
        self._check_correctable(rows)
        self._prepare(rows)
        self.model.train()
        generator = torch.Generator().manual_seed(derive_seed("update", self.config.run.seed, step) % (2**63))
        stats = _Stats()
        for epoch in range(optim.epochs):
            order = torch.randperm(len(rows), generator=generator).tolist()
            size = math.ceil(len(rows) / optim.mini_batches)
            for mini in chunks([rows[i] for i in order], size):
                self._set_weights(mini)
                num_tokens = float(sum(len(r.response_ids) for r in mini))
                self.optimizer.zero_grad(set_to_none=True)
                for micro in chunks(mini, optim.micro_batch_size):
                    self._micro_step(micro, num_tokens, len(mini), stats, first_pass=epoch == 0 and stats.steps == 0)
                if optim.max_grad_norm:
                    norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(self.model), optim.max_grad_norm)
                    stats.grad_norms.append(float(norm))
                self.optimizer.step()
                stats.steps += 1
        self.model.eval()
        return stats.summary(optim.epochs * optim.mini_batches)

    # ------------------------------------------------------------------ before the optimizer steps

    def _check_correctable(self, rows: Sequence[Row]) -> None:
        mode = self.config.loss.importance_correction
        lacking = [r for r in rows if _corrected(r, mode) and r.rollout_logprobs is None]
        if lacking:
            raise InvalidArgument(
                f"{len(lacking)} rows need an importance correction (loss.importance_correction: {mode}) but their "
                "records carry no sampler logprobs of the distribution trained on (a backend that returns none, or "
                "raw logprobs sampled at a temperature other than 1: record processed logprobs). Set "
                "loss.importance_correction: none to train them uncorrected"
            )

    def _prepare(self, rows: list[Row]) -> None:
        """The trainer's logprobs before the update (when epochs or mini-batches exceed one), its entropy
        (for uncertainty weights) and the reference's logprobs, in no-grad passes."""
        import torch

        optim, algo = self.config.optim, self.config.algorithm
        want_old = optim.epochs > 1 or optim.mini_batches > 1
        want_entropy = bool(algo.uncertainty_beta)
        with torch.no_grad():
            if want_old or want_entropy:
                self._fill(rows, self.model, old=want_old, entropy=want_entropy)
            if self.reference is not None:
                with self.reference.context():
                    self._fill(rows, self.reference.module(), ref=True)

    def _fill(
        self, rows: list[Row], module: Any, *, old: bool = False, entropy: bool = False, ref: bool = False
    ) -> None:
        """Set ``old_logprobs``/``entropy``/``ref_logprobs`` of every row from ``module``."""
        module_was_training = module.training
        module.eval()
        for micro in chunks(rows, self.config.optim.micro_batch_size):
            batch = collate(micro, self.tokenizer.pad_token_id)
            logits = sampling_logits(response_logits(module, batch), self.temperature)
            logprobs = token_logprobs(logits, batch.targets)
            entropies = entropy_from_logits(logits) if entropy else None
            for i, row in enumerate(micro):
                n = len(row.response_ids)
                if old:
                    row.old_logprobs = logprobs[i, :n].tolist()
                if ref:
                    row.ref_logprobs = logprobs[i, :n].tolist()
                if entropies is not None:
                    row.entropy = entropies[i, :n].tolist()
        module.train(module_was_training)

    def _set_weights(self, mini: Sequence[Row]) -> None:
        """ActFocus weights of the mini-batch's tokens, with statistics over the whole mini-batch."""
        algo = self.config.algorithm
        if algo.reasoning_weight == 1.0 and not algo.uncertainty_beta:
            return
        weights = minibatch_token_weights(
            [r.action_mask[: len(r.response_ids)] for r in mini],
            [r.entropy or [] for r in mini] if algo.uncertainty_beta else None,
            reasoning_weight=algo.reasoning_weight,
            uncertainty_beta=algo.uncertainty_beta,
        )
        for row, values in zip(mini, weights, strict=True):
            row.weights = values

    # ------------------------------------------------------------------ one micro-batch

    def _micro_step(
        self, micro: Sequence[Row], num_tokens: float, num_seqs: int, stats: _Stats, *, first_pass: bool
    ) -> None:
        import torch

        batch = collate(micro, self.tokenizer.pad_token_id)
        logits = sampling_logits(response_logits(self.model, batch), self.temperature)
        logprobs = token_logprobs(logits, batch.targets)
        with torch.set_grad_enabled(self.config.loss.entropy_coef > 0):
            entropy = entropy_from_logits(logits)
        if micro[0].old_logprobs is None:
            old = logprobs.detach()
        else:
            old = _padded([r.old_logprobs for r in micro], batch.response_width)
        ref = None if self.reference is None else _padded([r.ref_logprobs for r in micro], batch.response_width)
        weights = self._token_weights(micro, batch, old, stats)
        parts = policy_loss(
            logprobs,
            old,
            batch.advantages,
            batch.response_mask,
            self.loss_config,
            weights=weights,
            ref_logprobs=ref,
            entropy=entropy,
            num_tokens=num_tokens,
            num_seqs=num_seqs,
        )
        parts.loss.backward()
        tokens = batch.num_tokens
        values = (parts.pg_loss, parts.kl, parts.entropy, parts.clip_fraction, parts.approx_kl_old)
        stats.add(tokens, dict(zip(LOGGED, values, strict=True)))
        if first_pass:  # the weights the sampler used
            stats.add_gap(logprobs.detach(), batch)

    def _token_weights(self, micro: Sequence[Row], batch: Batch, old: Any, stats: _Stats) -> Any:
        """The per-token weights of a micro-batch: ActFocus's (set per mini-batch) times truncated
        importance weights on the rows another policy sampled; None when every weight is 1."""
        import torch

        weights = None
        if any(r.weights is not None for r in micro):
            weights = _padded([r.weights or [1.0] * len(r.response_ids) for r in micro], batch.response_width)
        loss = self.config.loss
        corrected = torch.tensor([float(_corrected(r, loss.importance_correction)) for r in micro])
        if float(corrected.sum()) == 0:
            return weights
        ratio = importance_weights(old, batch.rollout_logprobs, loss.importance_cap)
        is_weights = torch.where(corrected[:, None] > 0, ratio, torch.ones_like(ratio))
        stats.add_importance(ratio, batch.response_mask * corrected[:, None], loss.importance_cap)
        return is_weights if weights is None else weights * is_weights


def _corrected(row: Row, mode: str) -> bool:
    return mode == "all" or (mode == "off_policy" and row.off_policy)


class _Stats:
    """Token-weighted loss statistics, the sampler's logprob gap and the importance weights of an update."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.weight_total = 0.0
        self.grad_norms: list[float] = []
        self.steps = 0
        self.gap_sum = 0.0
        self.gap_tokens = 0.0
        self.is_sum = 0.0
        self.is_max = 0.0
        self.is_truncated = 0.0
        self.is_tokens = 0.0

    def add(self, tokens: float, values: dict[str, float]) -> None:
        self.weight_total += tokens
        for key, value in values.items():
            self.totals[key] = self.totals.get(key, 0.0) + value * tokens

    def add_gap(self, logprobs: Any, batch: Batch) -> None:
        """How far the sampler's logprobs are from the trainer's, over rows that have them."""
        mask = batch.response_mask * batch.has_rollout_logprobs[:, None]
        self.gap_sum += float(((logprobs - batch.rollout_logprobs).abs() * mask).sum())
        self.gap_tokens += float(mask.sum())

    def add_importance(self, ratio: Any, mask: Any, cap: float) -> None:
        self.is_sum += float((ratio * mask).sum())
        self.is_tokens += float(mask.sum())
        self.is_truncated += float(((ratio >= cap) * mask).sum())
        if float(mask.sum()):
            self.is_max = max(self.is_max, float((ratio * mask).max()))

    def summary(self, optimizer_steps: int) -> dict[str, float]:
        stats = {f"loss/{key}": value / max(self.weight_total, 1.0) for key, value in self.totals.items()}
        if self.grad_norms:
            stats["optim/grad_norm"] = sum(self.grad_norms) / len(self.grad_norms)
        stats["optim/optimizer_steps"] = optimizer_steps
        if self.gap_tokens:
            stats["check/sampler_logprob_gap"] = self.gap_sum / self.gap_tokens
        if self.is_tokens:
            stats["loss/is_weight_mean"] = self.is_sum / self.is_tokens
            stats["loss/is_weight_max"] = self.is_max
            stats["loss/is_truncated_fraction"] = self.is_truncated / self.is_tokens
            stats["loss/is_tokens"] = self.is_tokens
        return stats


def _padded(values: Sequence[Sequence[float]], width: int) -> Any:
    import torch

    out = torch.zeros((len(values), width), dtype=torch.float32)
    for i, row in enumerate(values):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out

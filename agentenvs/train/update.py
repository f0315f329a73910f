"""The update half of a GRPO step: epochs of mini-batch optimizer steps over the rows of a batch.

Old log-probabilities are recomputed by the trainer's model (so a sampler that differs numerically,
like vLLM, never biases the ratio); with one epoch and one mini-batch the ratio is exactly 1 and they
come free from the same forward pass. The reference model's log-probabilities feed the KL term.
See docs/train.md, "One step".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentenvs.seeding import derive_seed
from agentenvs.train import advantages as adv
from agentenvs.train.batching import Row, chunks, collate, response_logits, token_logprobs
from agentenvs.train.config import TrainConfig
from agentenvs.train.losses import entropy_from_logits, policy_loss
from agentenvs.train.modeling import Reference, trainable_parameters


class PolicyUpdate:
    """Trains ``model`` with ``optimizer`` on rows of per-turn advantages (the loss of ``config.loss``)."""

    def __init__(self, model: Any, tokenizer: Any, optimizer: Any, reference: Reference | None, config: TrainConfig):
        self.model = model
        self.tokenizer = tokenizer
        self.optimizer = optimizer
        self.reference = reference
        self.config = config

    def run(self, rows: list[Row], step: int) -> dict[str, float]:
        """Epochs of mini-batch optimizer steps over ``rows``; returns token-weighted loss statistics."""
        import torch

        optim = self.config.optim
        pad = self.tokenizer.pad_token_id
        needs_old = optim.epochs > 1 or optim.mini_batches > 1
        with torch.no_grad():
            if needs_old:
                self._fill_logprobs(rows, "old_logprobs", self.model)
            if self.reference is not None:
                with self.reference.context():
                    self._fill_logprobs(rows, "ref_logprobs", self.reference.module())
        self.model.train()
        steps_taken = 0
        generator = torch.Generator().manual_seed(derive_seed("update", self.config.run.seed, step) % (2**63))
        totals: dict[str, float] = {}
        weight_total = 0.0
        grad_norms = []
        mismatch = []
        for _ in range(optim.epochs):
            order = torch.randperm(len(rows), generator=generator).tolist()
            size = math.ceil(len(rows) / optim.mini_batches)
            for mini in chunks([rows[i] for i in order], size):
                num_tokens = float(sum(len(r.response_ids) for r in mini))
                self.optimizer.zero_grad(set_to_none=True)
                for micro in chunks(mini, optim.micro_batch_size):
                    batch = collate(micro, pad)
                    parts, logprobs = self._micro_loss(batch, micro, num_tokens, len(mini))
                    parts.loss.backward()
                    tokens = batch.num_tokens
                    weight_total += tokens
                    for key, value in (
                        ("loss/pg", parts.pg_loss),
                        ("loss/kl_ref", parts.kl),
                        ("loss/entropy", parts.entropy),
                        ("loss/clip_fraction", parts.clip_fraction),
                        ("loss/approx_kl_old", parts.approx_kl_old),
                    ):
                        totals[key] = totals.get(key, 0.0) + value * tokens
                    if steps_taken == 0:  # the weights the sampler used
                        gap = (logprobs.detach() - batch.rollout_logprobs).abs() * batch.response_mask
                        mismatch.append(float(gap.sum()) / max(tokens, 1.0))
                if optim.max_grad_norm:
                    norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(self.model), optim.max_grad_norm)
                    grad_norms.append(float(norm))
                self.optimizer.step()
                steps_taken += 1
        self.model.eval()
        stats = {key: value / max(weight_total, 1.0) for key, value in totals.items()}
        if grad_norms:
            stats["optim/grad_norm"] = sum(grad_norms) / len(grad_norms)
        stats["optim/optimizer_steps"] = optim.epochs * optim.mini_batches
        stats["check/sampler_logprob_gap"] = sum(mismatch) / max(len(mismatch), 1)
        return stats

    def _micro_loss(self, batch: Any, micro: Sequence[Row], num_tokens: float, num_seqs: int) -> tuple[Any, Any]:
        import torch

        algo = self.config.algorithm
        logits = response_logits(self.model, batch)
        logprobs = token_logprobs(logits, batch.targets)
        with torch.set_grad_enabled(self.config.loss.entropy_coef > 0):
            entropy = entropy_from_logits(logits)
        if micro[0].old_logprobs is None:
            old = logprobs.detach()
        else:
            old = _padded([r.old_logprobs for r in micro], batch.response_width)
        ref = None if self.reference is None else _padded([r.ref_logprobs for r in micro], batch.response_width)
        weights = None
        if algo.reasoning_weight != 1.0 or algo.uncertainty_beta:
            weights = adv.token_weights(
                batch.response_mask,
                batch.action_mask,
                reasoning_weight=algo.reasoning_weight,
                uncertainty=entropy.detach(),
                uncertainty_beta=algo.uncertainty_beta,
            )
        loss_config = self.config.loss
        if loss_config.agg == "seq-mean-token-sum-norm" and loss_config.norm_constant is None:
            from dataclasses import replace

            loss_config = replace(loss_config, norm_constant=float(self.config.rollout.max_tokens))
        parts = policy_loss(
            logprobs,
            old,
            batch.advantages,
            batch.response_mask,
            loss_config,
            weights=weights,
            ref_logprobs=ref,
            entropy=entropy,
            num_tokens=num_tokens,
            num_seqs=num_seqs,
        )
        return parts, logprobs

    def _fill_logprobs(self, rows: list[Row], field: str, module: Any) -> None:
        """Set ``row.<field>`` to the per-token logprobs ``module`` gives each row's response."""
        module_was_training = module.training
        module.eval()
        for micro in chunks(rows, self.config.optim.micro_batch_size):
            batch = collate(micro, self.tokenizer.pad_token_id)
            logprobs = token_logprobs(response_logits(module, batch), batch.targets)
            for i, row in enumerate(micro):
                setattr(row, field, logprobs[i, : len(row.response_ids)].tolist())
        module.train(module_was_training)


def _padded(values: Sequence[Sequence[float]], width: int) -> Any:
    import torch

    out = torch.zeros((len(values), width), dtype=torch.float32)
    for i, row in enumerate(values):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out

"""The update on rows from real rollout records: the micro-batch size changes memory, never the gradient.

Rows come from ``run_rollouts`` (the trainer's own rollout of a from-scratch tiny model on
``train_envs_for_tests.LettersEnv``, whose dense reward gives varied advantages). For every estimator and
every token weighting (none, ActFocus's reasoning weight, its uncertainty weight, truncated importance
weights), the gradient of one mini-batch accumulated over micro-batches of 1, 2 and all rows must agree.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

from agentenvs.errors import InvalidArgument
from agentenvs.train.batching import rows_from_records
from agentenvs.train.config import config_from_dict
from agentenvs.train.trainer import Trainer
from agentenvs.train.update import PolicyUpdate

sys.path.insert(0, str(Path(__file__).parent))

SMALL = {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}
WEIGHTINGS = {
    "none": ({}, {}),
    "reasoning": ({"reasoning_weight": 0.5}, {}),
    "uncertainty": ({"reasoning_weight": 0.5, "uncertainty_beta": 0.5}, {}),
    "importance": ({}, {"importance_correction": "all", "importance_cap": 1.01}),
}


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    config = config_from_dict(
        {
            "model": {"path": "tiny", "tiny": SMALL},
            "env": {"name": "letters", "entry_point": "train_envs_for_tests:LettersEnv"},
            "rollout": {"groups_per_step": 2, "group_size": 4, "max_tokens": 10, "concurrency": 8, "batch_size": 8},
            "algorithm": {"filter_zero_variance": False},
            "loss": {"kl_coef": 0.05, "entropy_coef": 0.01},
            "optim": {"max_grad_norm": None},
            "run": {"steps": 1, "out": str(tmp_path_factory.mktemp("run")), "progress": False, "torch_threads": 1},
        }
    )
    with Trainer(config) as made:
        yield made


@pytest.fixture(scope="module")
def records(trainer):
    found = trainer.rollouts.rollout(1)
    tokens = [t for r in found for t in r.tokens.action_mask]
    assert any(0 in mask[-3:] for mask in tokens), "some responses should have reasoning tokens"
    return found


def gradient(trainer: Trainer, rows, micro_batch_size: int, algorithm: dict, loss: dict) -> torch.Tensor:
    config = trainer.config
    config = dataclasses.replace(
        config,
        algorithm=dataclasses.replace(config.algorithm, **algorithm),
        loss=dataclasses.replace(config.loss, **loss),
        optim=dataclasses.replace(config.optim, micro_batch_size=micro_batch_size),
    )
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
    PolicyUpdate(trainer.model, trainer.tokenizer, optimizer, trainer.reference, config).run(rows, step=1)
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


@pytest.mark.parametrize("weighting", sorted(WEIGHTINGS))
@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo", "gigpo"])
def test_the_gradient_is_the_same_for_every_micro_batch_size(trainer, records, estimator, weighting):
    algorithm, loss = WEIGHTINGS[weighting]
    trainer.config.algorithm.estimator = estimator
    values, keep = trainer.advantages(records)
    rows = rows_from_records(records, values, keep)
    assert any(r.advantage != 0 for r in rows)
    whole = gradient(trainer, rows, len(rows), algorithm, loss)
    assert float(whole.abs().sum()) > 0
    for size in (1, 2):
        # padding differs with the micro-batch's width, so values agree to float rounding, not bit for bit (the
        # uncertainty weights z-score entropies, which moves them most: ~5e-5); weights set per micro-batch
        # moved it by 6-9% here
        gap = float((gradient(trainer, rows, size, algorithm, loss) - whole).norm() / whole.norm())
        assert gap < 2e-4, f"micro-batches of {size}: the gradient moved by {gap:.2e} of its norm"


def test_the_trainer_computes_log_probs_of_the_distribution_the_sampler_drew_from(tmp_path):
    """At temperature 0.7 the sampler's recorded logprobs are the trainer's (logits divided alike); a trainer
    that ignored the temperature would be far from them, i.e. train another policy than the one that acted."""
    config = config_from_dict(
        {
            "model": {"path": "tiny", "tiny": SMALL},
            "env": {"name": "letters", "entry_point": "train_envs_for_tests:LettersEnv"},
            "rollout": {"groups_per_step": 2, "group_size": 4, "max_tokens": 10, "temperature": 0.7},
            "algorithm": {"filter_zero_variance": False},
            "run": {"steps": 1, "out": str(tmp_path), "progress": False, "torch_threads": 1},
        }
    )
    with Trainer(config) as trainer:
        records = trainer.rollouts.rollout(1)
        assert {r.tokens.logprob_kind for r in records} == {"processed"}
        values, keep = trainer.advantages(records)
        rows = rows_from_records(records, values, keep, temperature=0.7)
        optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
        stats = PolicyUpdate(trainer.model, trainer.tokenizer, optimizer, None, config).run(rows, step=1)
        assert stats["check/sampler_logprob_gap"] < 1e-3
        untempered = dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, temperature=1.0))
        blind = PolicyUpdate(trainer.model, trainer.tokenizer, optimizer, None, untempered).run(rows, step=1)
        assert blind["check/sampler_logprob_gap"] > 0.02  # an untrained model's logits are flat: 0.044 nats here


def test_raw_logprobs_sampled_at_another_temperature_are_not_taken_for_the_behaviour_policy(trainer, records):
    raw = [dataclasses.replace(r, tokens=dataclasses.replace(r.tokens, logprob_kind="raw")) for r in records]
    values, keep = trainer.advantages(raw)
    assert all(row.rollout_logprobs is None for row in rows_from_records(raw, values, keep, temperature=0.7))
    assert all(row.rollout_logprobs is not None for row in rows_from_records(raw, values, keep, temperature=1.0))
    config = dataclasses.replace(
        trainer.config, loss=dataclasses.replace(trainer.config.loss, importance_correction="all")
    )
    rows = rows_from_records(raw, values, keep, temperature=0.7)
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
    with pytest.raises(InvalidArgument, match="processed logprobs"):
        PolicyUpdate(trainer.model, trainer.tokenizer, optimizer, None, config).run(rows, step=1)

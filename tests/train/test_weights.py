"""Token weights: ActFocus's over a whole mini-batch, truncated importance weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentenvs.train import weights


def test_token_weights_downweight_reasoning_and_keep_scale():
    loss = np.array([0, 1, 1, 1, 1])
    action = np.array([0, 0, 0, 1, 1])
    w = weights.token_weights(loss, action, reasoning_weight=0.5, rescale=False)
    assert w.tolist() == [0, 0.5, 0.5, 1, 1]
    # rescaled: sum must be 4 (generated tokens); raw sum 3 -> factor 4/3
    w = weights.token_weights(loss, action, reasoning_weight=0.5)
    assert w.tolist() == pytest.approx([0, 2 / 3, 2 / 3, 4 / 3, 4 / 3])


def test_token_weights_uncertainty_on_action_tokens_with_torch():
    loss = torch.tensor([1.0, 1.0, 1.0])
    action = torch.tensor([0.0, 1.0, 1.0])
    entropy = torch.tensor([9.0, 1.0, 3.0])  # action tokens: mean 2, std 1 -> z = -1, +1
    w = weights.token_weights(
        loss, action, reasoning_weight=0.0, uncertainty=entropy, uncertainty_beta=0.5, rescale=False
    )
    assert w.tolist() == pytest.approx([0.0, 1.0, 1.5], abs=1e-5)


def test_a_rows_weight_does_not_depend_on_which_rows_share_its_micro_batch():
    # a reasoning-only row and an action-only row: weighed together, then each alone
    masks = [[0, 0, 0, 0], [1, 1]]
    together = weights.minibatch_token_weights(masks, None, reasoning_weight=0.5, uncertainty_beta=0.0)
    assert together == [pytest.approx([0.75] * 4), pytest.approx([1.5] * 2)]  # sum kept at 6
    # per micro-batch (the old behaviour) the reasoning-only row alone would be rescaled back to 1.0
    alone = weights.minibatch_token_weights(masks[:1], None, reasoning_weight=0.5, uncertainty_beta=0.0)
    assert alone == [pytest.approx([1.0] * 4)] != together[:1]


def test_importance_weights_are_truncated_and_detached():
    old = torch.tensor([[0.0, -1.0, -3.0]], requires_grad=True)
    behaviour = torch.tensor([[0.0, -2.0, -0.5]])
    w = weights.importance_weights(old, behaviour, cap=2.0)
    assert w.tolist()[0] == pytest.approx([1.0, 2.0, float(np.exp(-2.5))])  # e^1 = 2.72 capped at 2
    assert not w.requires_grad

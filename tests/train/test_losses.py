"""Loss terms against tensors worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from agentenvs.errors import InvalidArgument
from agentenvs.train import losses


def test_aggregation_modes():
    values = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    assert float(losses.aggregate(values, mask, "token-mean")) == pytest.approx(10 / 4)
    assert float(losses.aggregate(values, mask, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    assert float(losses.aggregate(values, mask, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    assert float(losses.aggregate(values, mask, "seq-mean-token-sum-norm")) == pytest.approx(10 / (4 * 2))
    assert float(losses.aggregate(values, mask, "seq-mean-token-sum-norm", norm_constant=10)) == pytest.approx(0.5)
    with pytest.raises(InvalidArgument, match="choose one of"):
        losses.aggregate(values, mask, "mean")


@pytest.mark.parametrize("mode", losses.AGG_MODES)
def test_micro_batches_add_up_to_the_full_batch(mode):
    torch.manual_seed(0)
    values = torch.randn(4, 5)
    mask = (torch.rand(4, 5) > 0.3).int()
    full = losses.aggregate(values, mask, mode)
    counts = {"num_tokens": float(mask.sum()), "num_seqs": 4.0}
    parts = sum(losses.aggregate(values[i : i + 2], mask[i : i + 2], mode, **counts) for i in (0, 2))
    assert float(parts) == pytest.approx(float(full), rel=1e-5)


def test_ppo_clip_asymmetric_and_dual_clip():
    old = torch.zeros(1, 4)
    # ratios 1.5, 0.5, 1.5, 5.0 with advantages +1, +1, -1, -1
    new = torch.log(torch.tensor([[1.5, 0.5, 1.5, 5.0]]))
    advantage = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    loss, clipped = losses.ppo_clip_terms(new, old, advantage, clip_low=0.2, clip_high=0.3, dual_clip=3.0)
    # +A, ratio 1.5 > 1.3: max(-1.5, -1.3) = -1.3 (clipped)
    # +A, ratio 0.5 < 0.8: max(-0.5, -0.8) = -0.5 (not clipped: the pessimistic branch is unclipped)
    # -A, ratio 1.5: max(1.5, 1.3) = 1.5 (not clipped)
    # -A, ratio 5: max(5, 1.3) = 5 -> dual clip bounds it at 3
    assert loss[0].tolist() == pytest.approx([-1.3, -0.5, 1.5, 3.0], abs=1e-5)
    assert clipped.tolist() == [[1.0, 0.0, 0.0, 1.0]]
    no_dual, _ = losses.ppo_clip_terms(new, old, advantage, clip_low=0.2, clip_high=0.3, dual_clip=None)
    assert float(no_dual[0, 3]) == pytest.approx(5.0)
    with pytest.raises(InvalidArgument, match="greater than 1"):
        losses.ppo_clip_terms(new, old, advantage, dual_clip=0.5)


def test_gradient_at_ratio_one_is_minus_advantage():
    logp = torch.zeros(1, 2, requires_grad=True)
    loss, _ = losses.ppo_clip_terms(logp, torch.zeros(1, 2), torch.tensor([[2.0, -1.0]]))
    loss.sum().backward()
    assert logp.grad.tolist() == [[-2.0, 1.0]]


def test_k3_kl():
    # logp = log 0.5, ref = log 0.25: r = ref/p = 0.5 -> r - log r - 1 = 0.5 + log 2 - 1
    kl = losses.k3_kl(torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25])))
    assert float(kl) == pytest.approx(0.5 + math.log(2) - 1)
    assert float(losses.k3_kl(torch.tensor([-1.0]), torch.tensor([-1.0]))) == 0.0


def test_entropy_from_logits():
    uniform = losses.entropy_from_logits(torch.zeros(1, 4))
    assert float(uniform) == pytest.approx(math.log(4))
    peaked = losses.entropy_from_logits(torch.tensor([[100.0, 0.0, 0.0]]))
    assert float(peaked) == pytest.approx(0.0, abs=1e-6)


def test_policy_loss_combines_terms_under_the_mask():
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.9]]))
    old = logp.clone()
    advantage = torch.tensor([[1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 0]])
    ref = torch.log(torch.tensor([[0.25, 0.25, 0.9]]))
    entropy = torch.tensor([[1.0, 3.0, 100.0]])
    config = losses.LossConfig(kl_coef=0.1, entropy_coef=0.01, agg="token-mean")
    parts = losses.policy_loss(logp, old, advantage, mask, config, ref_logprobs=ref, entropy=entropy)
    kl = 0.5 + math.log(2) - 1
    # pg = mean(-1, -1) = -1; + 0.1 * kl - 0.01 * mean(1, 3)
    assert float(parts.loss) == pytest.approx(-1 + 0.1 * kl - 0.01 * 2)
    assert parts.kl == pytest.approx(kl)
    assert parts.entropy == pytest.approx(2.0)
    assert parts.clip_fraction == 0.0
    weights = torch.tensor([[0.5, 1.5, 1.0]])
    weighted = losses.policy_loss(logp, old, advantage, mask, losses.LossConfig(), weights=weights)
    assert float(weighted.loss) == pytest.approx(-(0.5 + 1.5) / 2)

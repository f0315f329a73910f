"""Advantage estimators against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord, StepRecord
from agentenvs.train import advantages as adv


def episode(group: str, rewards: list[float], anchors: list[str] | None = None, observations=None) -> EpisodeRecord:
    steps = [
        StepRecord(
            turn=t,
            observation=(observations or [f"obs{t}"] * len(rewards))[t],
            response="r",
            action="a",
            action_span=None,
            reward=r,
            terminated=t == len(rewards) - 1,
            truncated=False,
            info={} if anchors is None else {"anchor": anchors[t]},
        )
        for t, r in enumerate(rewards)
    ]
    return EpisodeRecord(
        episode_id=f"{group}-{len(rewards)}-{sum(rewards)}",
        group_id=group,
        env="bandit",
        env_version="1",
        split="train",
        panel_hash="h",
        task_id="t",
        task_type=None,
        seed=0,
        policy={},
        sampling={},
        steps=steps,
        return_=float(sum(rewards)),
        num_turns=len(rewards),
    )


def test_grpo_group_mean_and_unbiased_std():
    # group a: scores 1, 0, 0, 1 -> mean 0.5, unbiased std sqrt(1/3) = 0.57735
    a = adv.group_normalized([1, 0, 0, 1, 3], ["a", "a", "a", "a", "b"])
    assert a[0] == pytest.approx(0.5 / (math.sqrt(1 / 3) + 1e-6))
    assert a[1] == pytest.approx(-0.866025, abs=1e-5)
    # group of one keeps its raw score (mean 0, std 1), as in verl
    assert a[4] == pytest.approx(3 / (1 + 1e-6))


def test_drgrpo_has_no_std_scaling():
    assert adv.group_normalized([2, 0, 1], ["g"] * 3, scale_by_std=False) == pytest.approx([1, -1, 0])


def test_rloo_leave_one_out_baseline():
    # s = 1, 0, 0, 1: A_0 = 1 - (0+0+1)/3 = 2/3; A_1 = 0 - 2/3
    assert adv.leave_one_out([1, 0, 0, 1], ["g"] * 4) == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    assert adv.leave_one_out([5.0], ["solo"]) == [5.0]


def test_discounted_returns():
    assert adv.discounted_returns([0, 0, 1], 0.5) == pytest.approx([0.25, 0.5, 1.0])


def test_gigpo_episode_plus_anchor_step_level():
    # Two episodes in one group, both start in state S0.
    # ep0: S0 -a-> S1 -b-> done, rewards 0, 1 (return 1); ep1: S0 -c-> done, reward 0 (return 0).
    # Episode level (mean_norm): +0.5, -0.5.
    # Discounted returns (gamma 0.5): ep0 [0.5, 1.0]; ep1 [0.0].
    # Anchor S0 holds ep0 t0 (0.5) and ep1 t0 (0.0): mean 0.25 -> +0.25, -0.25. S1 alone -> 0.
    out = adv.gigpo([[0, 1], [0]], [["S0", "S1"], ["S0"]], ["g", "g"], gamma=0.5, step_weight=1.0)
    assert out[0] == pytest.approx([0.5 + 0.25, 0.5 + 0.0])
    assert out[1] == pytest.approx([-0.5 - 0.25])
    weighted = adv.gigpo([[0, 1], [0]], [["S0", "S1"], ["S0"]], ["g", "g"], gamma=0.5, step_weight=2.0)
    assert weighted[0][0] == pytest.approx(0.5 + 0.5)


def test_gigpo_with_std_and_cross_steps():
    # cross_steps: rows are ep0 twice (return 1) and ep1 once (return 0): mean 2/3.
    out = adv.gigpo([[0, 1], [0]], [["S0", "S1"], ["X"]], ["g", "g"], gamma=1.0, cross_steps=True)
    assert out[0] == pytest.approx([1 / 3, 1 / 3])
    assert out[1] == pytest.approx([-2 / 3])
    # with std: episode returns 1, 0 -> +-0.5 / 0.7071 = +-0.7071
    std = adv.gigpo([[1], [0]], [["A"], ["B"]], ["g", "g"], scale_by_std=True)
    assert std[0][0] == pytest.approx(0.70710, abs=1e-4)


def test_gigpo_similarity_merges_near_identical_observations():
    obs = [["You are in room 1. A key is here."], ["You are in room 1. A key is here!"]]
    exact = adv.gigpo([[1], [0]], obs, ["g", "g"], gamma=1.0)
    similar = adv.gigpo([[1], [0]], obs, ["g", "g"], gamma=1.0, similarity=0.9)
    assert exact[0][0] == pytest.approx(0.5)  # different anchors: step level 0
    assert similar[0][0] == pytest.approx(1.0)  # one anchor group: +0.5 more


def test_gigpo_anchors_do_not_cross_episode_groups():
    out = adv.gigpo([[1], [0]], [["S"], ["S"]], ["g1", "g2"])
    assert out == [[pytest.approx(1.0)], [pytest.approx(0.0)]]


def test_zero_variance_filtering():
    scores = [1, 1, 0, 1, 2]
    groups = ["a", "a", "b", "b", "c"]
    assert adv.zero_variance_groups(scores, groups) == {"a", "c"}
    assert adv.informative_groups(scores, groups) == [False, False, True, True, False]


def test_token_weights_downweight_reasoning_and_keep_scale():
    loss = np.array([0, 1, 1, 1, 1])
    action = np.array([0, 0, 0, 1, 1])
    w = adv.token_weights(loss, action, reasoning_weight=0.5, rescale=False)
    assert w.tolist() == [0, 0.5, 0.5, 1, 1]
    # rescaled: sum must be 4 (generated tokens); raw sum 3 -> factor 4/3
    w = adv.token_weights(loss, action, reasoning_weight=0.5)
    assert w.tolist() == pytest.approx([0, 2 / 3, 2 / 3, 4 / 3, 4 / 3])


def test_token_weights_uncertainty_on_action_tokens_with_torch():
    loss = torch.tensor([1.0, 1.0, 1.0])
    action = torch.tensor([0.0, 1.0, 1.0])
    entropy = torch.tensor([9.0, 1.0, 3.0])  # action tokens: mean 2, std 1 -> z = -1, +1
    w = adv.token_weights(loss, action, reasoning_weight=0.0, uncertainty=entropy, uncertainty_beta=0.5, rescale=False)
    assert w.tolist() == pytest.approx([0.0, 1.0, 1.5], abs=1e-5)


def test_turn_advantages_over_records():
    records = [episode("g", [0, 1]), episode("g", [0, 0]), episode("h", [1])]
    grpo = adv.turn_advantages(records, "grpo")
    assert grpo[0] == pytest.approx([0.70710] * 2, abs=1e-4)  # every turn gets the episode value
    assert len(grpo[2]) == 1
    assert adv.turn_advantages(records, "drgrpo")[1] == pytest.approx([-0.5, -0.5])
    assert adv.turn_advantages(records, "rloo")[0] == pytest.approx([1.0, 1.0])
    gigpo = adv.turn_advantages([episode("g", [0, 1], ["S0", "S1"]), episode("g", [0], ["S0"])], "gigpo", gamma=0.5)
    assert gigpo == [pytest.approx([0.75, 0.5]), pytest.approx([-0.75])]
    with pytest.raises(InvalidArgument, match="choose one of"):
        adv.turn_advantages(records, "ppo")


def test_turn_advantages_gigpo_similarity_reads_observations():
    records = [
        episode("g", [1], ["h1"], ["You see a red door."]),
        episode("g", [0], ["h2"], ["You see a red door!"]),
    ]
    out = adv.turn_advantages(records, "gigpo", gamma=1.0, similarity=0.9)
    assert out == [[pytest.approx(1.0)], [pytest.approx(-1.0)]]

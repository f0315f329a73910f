"""Advantage estimators against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord, StepRecord
from agentenvs.train import advantages as adv


def episode(
    group: str, rewards: list[float], anchors: list[str] | None = None, observations=None, invalid=(), **outcome
) -> EpisodeRecord:
    """A record as the driver writes it: ``anchors[t]`` is the state action ``t`` was taken in."""
    steps = [
        StepRecord(
            turn=t + 1,
            observation=(observations or [f"obs{t}"] * len(rewards))[t],
            response="r",
            action="a",
            action_span=None,
            reward=r,
            terminated=t == len(rewards) - 1,
            truncated=False,
            info={"action_valid": t not in invalid, "anchor": f"after-{t}"},
            anchor=None if anchors is None else anchors[t],
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
        **outcome,
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


def test_a_tied_group_gets_exactly_zero_from_every_estimator():
    scores = [0.1, 0.1, 0.1, 1.0, 0.0]  # float sums: (0.1 + 0.1 + 0.1) / 3 is not exactly 0.1
    groups = ["tied", "tied", "tied", "h", "h"]
    for values in (
        adv.group_normalized(scores, groups),
        adv.group_normalized(scores, groups, scale_by_std=False),
        adv.leave_one_out(scores, groups),
    ):
        assert values[:3] == [0.0, 0.0, 0.0] and values[3] > 0 > values[4]


def test_the_filter_keeps_a_tied_group_only_where_the_step_level_carries_signal():
    # both groups tie on the return (1); in "dense" the step returns differ in the shared start state
    dense = [episode("dense", [1, 0], ["S0", "S1"]), episode("dense", [0, 1], ["S0", "S2"])]
    flat = [episode("flat", [1], ["S0"]), episode("flat", [1], ["S0"])]
    solo = [episode("solo", [1], ["S0"])]
    records = dense + flat + solo
    values = adv.turn_advantages(records, "gigpo", gamma=0.5)
    assert values[2] == [0.0] and values[3] == [0.0]
    assert adv.informative_groups(values, [r.group_id for r in records]) == [True, True, False, False, False]
    grpo = adv.turn_advantages(records, "grpo")
    assert adv.informative_groups(grpo, [r.group_id for r in records]) == [False] * 5


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


def test_gigpo_groups_steps_by_the_state_the_action_was_taken_in_not_the_one_it_reached():
    # both start in S0 and act differently; the info anchors (states reached) differ, so grouping by them
    # would put the two first actions in different groups and compare nothing
    records = [episode("g", [1.0], ["S0"]), episode("g", [0.0], ["S0"])]
    assert adv.step_groups([["S0"], ["S0"]], ["g", "g"]) == [[(0, 0), (1, 0)]]
    values = adv.turn_advantages(records, "gigpo", gamma=1.0)
    assert values == [[pytest.approx(0.5 + 0.5)], [pytest.approx(-0.5 - 0.5)]]


def test_gigpo_refuses_records_written_before_steps_kept_their_anchor():
    old = episode("g", [1.0], ["S0"])
    old.schema = "agentenvs.episode/1"
    with pytest.raises(InvalidArgument, match="Re-run the rollout"):
        adv.turn_advantages([old, episode("g", [0.0], ["S0"])], "gigpo")
    assert adv.turn_advantages([old, episode("g", [0.0], ["S0"])], "grpo")  # outcome estimators need no anchor


def test_every_estimator_reads_the_score_source_gigpo_included():
    # returns tie (0.5 each) but success differs: with score_source success, the success is the reward
    won = episode("g", [0.25, 0.25], ["S0", "S1"], success=True, score=1.0)
    lost = episode("g", [0.0, 0.5], ["S0", "S2"], success=False, score=0.0)
    for estimator in ("grpo", "drgrpo", "rloo"):
        on_return = adv.turn_advantages([won, lost], estimator, gamma=1.0)
        on_success = adv.turn_advantages([won, lost], estimator, score_source="success", gamma=1.0)
        assert all(a == 0.0 for a in on_return[0] + on_return[1]), estimator
        assert on_success[0][0] > 0 > on_success[1][0], estimator
    # GiGPO's step level credits the same rewards: success on the last turn, scaled (10 * won as verl-agent)
    gigpo = adv.turn_advantages([won, lost], "gigpo", score_source="success", score_scale=10.0, gamma=0.5)
    # episode level: 10 vs 0 -> +-5; S0 step returns 10 * 0.5 = 5 vs 0 -> +-2.5
    assert gigpo == [pytest.approx([7.5, 5.0]), pytest.approx([-7.5, -5.0])]


def test_invalid_action_penalty_is_verl_agents_per_turn_score_adjustment():
    # one group, both episodes return 1; ep1's first action was refused
    records = [episode("g", [0, 1], ["S0", "S1"]), episode("g", [0, 1], ["S0", "S2"], invalid=(0,))]
    per_episode = adv.turn_advantages(records, "drgrpo", invalid_action_penalty=0.1)
    assert per_episode == [pytest.approx([0.0, 0.0]), pytest.approx([-0.1, 0.0])]
    # cross-step statistics over the turns' scores 1, 1, 0.9, 1 (mean 0.975), as verl-agent
    rows = adv.turn_advantages(records, "drgrpo", invalid_action_penalty=0.1, cross_steps=True)
    assert rows == [pytest.approx([0.025, 0.025]), pytest.approx([-0.075, 0.025])]
    # GiGPO: the penalty also comes off the turn's step return (S0: 1 vs 0.9 -> +-0.05)
    gigpo = adv.turn_advantages(records, "gigpo", invalid_action_penalty=0.1, gamma=1.0)
    assert gigpo == [pytest.approx([0.05, 0.0]), pytest.approx([-0.15, 0.0])]

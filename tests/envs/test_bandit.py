"""The bandit environment: rules, grammar, metrics, reward monotonicity, baselines and the contract."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import agentenvs
from agentenvs.envs.bandit.baselines import (
    BASELINES,
    RandomPolicy,
    ThompsonPolicy,
    UCB1Policy,
    play_episode,
    play_episodes,
)
from agentenvs.envs.bandit.env import BanditEnv, success_window
from agentenvs.envs.bandit.grammar import find_action, parse_action
from agentenvs.envs.bandit.observation import parse_observation
from agentenvs.errors import EpisodeOver, UnknownTask
from agentenvs.info import check_info
from agentenvs.testing import check_text_env

BERNOULLI = "bernoulli-k5-test-000"
GAUSSIAN = "gaussian-k5-test-000"


@pytest.fixture
def env() -> BanditEnv:
    environment = agentenvs.make("bandit")
    yield environment
    environment.close()


def test_conformance_suite_passes():
    report = check_text_env(functools.partial(agentenvs.make, "bandit"), max_steps=100)
    assert "cross_process" in report.passed and "anchor" in report.passed


def test_conformance_suite_passes_with_a_turn_cap():
    check_text_env(functools.partial(agentenvs.make, "bandit", max_turns=7))


def test_gymnasium_id_builds_the_bandit():
    import gymnasium

    env = gymnasium.make("agentenvs/Bandit-v0")
    try:
        observation, info = env.reset(seed=3)
        assert "Multi-armed bandit" in observation and info["max_turns"] in (40, 60, 100)
    finally:
        env.close()


def test_reset_shows_arms_and_conforming_info(env):
    observation, info = env.reset(seed=0, options={"task_id": BERNOULLI})
    task = env.task
    assert check_info(info) == []
    assert info["task_type"] == "bernoulli-k5" and info["max_turns"] == task["horizon"] == 60
    assert info["admissible_actions"] == [f"pull[{i}]" for i in range(5)]
    for index, name in enumerate(task["arms"]):
        assert f"pull[{index}] {name}" in observation
    assert "Pulls left: 60 of 60" in observation
    assert "privileged" not in info
    assert str(task["means"][0]) not in observation


def test_privileged_info_only_when_asked():
    env = agentenvs.make("bandit", privileged=True)
    _, info = env.reset(seed=0, options={"task_id": GAUSSIAN})
    means = env.task["means"]
    assert info["privileged"] == {"arm_means": means, "best_arm": int(np.argmax(means)), "arm_stds": env.task["stds"]}
    _, info = env.reset(seed=0, options={"task_id": BERNOULLI})
    assert info["admissible_actions"][info["privileged"]["best_arm"]] == f"pull[{int(np.argmax(env.task['means']))}]"
    assert "arm_stds" not in info["privileged"] and check_info(info) == []


def test_every_spelling_of_a_pull_reaches_the_same_arm(env):
    env.reset(seed=0, options={"task_id": BERNOULLI})
    name = env.task["arms"][2]
    for action in (
        "pull[2]",
        "PULL[ 2 ]",
        "pull(2)",
        "pull 2",
        name,
        name.upper(),
        f"pull {name.title()}",
        f" {name} ",
    ):
        assert parse_action(action, env.task["arms"]) == 2, action
    for action in ("pull", "pull[x]", "pulls[2]", f"{name}s", "", "2", "pull[-1]", "<action>pull[2]</action> more"):
        assert parse_action(action, env.task["arms"]) is None, action


def test_extract_action_finds_the_pull_in_a_full_response(env):
    env.reset(seed=0, options={"task_id": BERNOULLI})
    arms = env.task["arms"]
    cases = {
        f"{arms[0]} looks good so far.\n<action>pull[3]</action>": "pull[3]",
        f"Thinking: {arms[1]} pays most, so I pull[1] now.": "pull[1]",
        f"I'll go with {arms[4].upper()} this time": arms[4].upper(),
        f"<action>I choose {arms[2]}</action> (not {arms[3]})": arms[2],
    }
    for response, expected in cases.items():
        found = env.extract_action(response)
        assert found is not None and found.action == expected, response
        assert response[found.start : found.end] == expected
        _, _, _, _, info = env.step(found.action)
        assert info["action_valid"]
    garbage = env.extract_action("no idea\nmaybe later")
    assert garbage is not None and garbage.action == "maybe later"
    assert find_action("", arms) is None


def test_invalid_action_uses_the_pull_pays_nothing_and_says_why(env):
    env.reset(seed=0, options={"task_id": BERNOULLI})
    best = float(max(env.task["means"]))
    for turn, action in enumerate(("nonsense", "pull[7]", "\x00\u202e"), start=1):
        observation, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0 and not info["action_valid"] and not (terminated or truncated)
        assert info["turn"] == turn and f"Pulls left: {60 - turn} of 60" in observation
        assert info["metrics"]["invalid_actions"] == turn
        assert info["metrics"]["step_regret"] == pytest.approx(best)
        assert "wasted" in observation
    assert "no arm" in env.step("pull[9]")[0]


def test_horizon_ends_the_episode_with_success_score_and_metrics(env):
    _, info = env.reset(seed=5, options={"task_id": BERNOULLI})
    best = int(np.argmax(env.task["means"]))
    second = int(np.argsort(env.task["means"])[-2])
    horizon = env.task["horizon"]
    for turn in range(horizon):
        arm = second if turn < horizon // 2 else best
        _, _, terminated, truncated, info = env.step(f"pull[{arm}]")
        assert terminated == (turn == horizon - 1) and not truncated
    assert info["success"] and info["end_reason"] == "success"
    means = np.asarray(env.task["means"])
    regret = (horizon // 2) * (means[best] - means[second])
    assert info["metrics"]["expected_regret"] == pytest.approx(regret)
    assert info["metrics"]["best_arm_rate"] == pytest.approx(0.5)
    assert info["metrics"]["window_best_arm_rate"] == 1.0
    assert 0 < info["score"] == pytest.approx(1 - regret / (horizon * (means[best] - means.mean())))
    assert check_info(info) == []
    with pytest.raises(EpisodeOver):
        env.step("pull[0]")


def test_success_needs_a_majority_of_the_last_fifth(env):
    env.reset(seed=5, options={"task_id": BERNOULLI})
    best = int(np.argmax(env.task["means"]))
    other = (best + 1) % 5
    window = success_window(60)
    assert window == 12
    for turn in range(60):
        in_window = turn >= 60 - window
        arm = best if (not in_window or turn % 2 == 0) else other  # exactly half of the window
        _, _, _, _, info = env.step(f"pull[{arm}]")
    assert info["metrics"]["window_best_arm_rate"] == 0.5
    assert not info["success"] and info["end_reason"] == "failure"


def test_a_turn_cap_truncates_and_still_scores():
    env = agentenvs.make("bandit", max_turns=3)
    _, info = env.reset(seed=0, options={"task_id": GAUSSIAN})
    assert info["max_turns"] == 3
    for _ in range(3):
        _, _, terminated, truncated, info = env.step("pull[0]")
    assert truncated and not terminated and info["end_reason"] == "max_turns" and not info["success"]
    assert 0.0 <= info["score"] <= 1.0


def test_same_task_and_seed_replay_exactly_and_seeds_differ(env):
    def rewards(seed: int) -> list[float]:
        env.reset(seed=seed, options={"task_id": GAUSSIAN})
        return [env.step(f"pull[{t % 5}]")[1] for t in range(30)]

    assert rewards(11) == rewards(11)
    assert rewards(11) != rewards(12)


def test_anchor_is_the_pulls_per_arm_and_left_whatever_their_order(env):
    def anchors(actions: list[str], task_id: str = BERNOULLI) -> list[str]:
        _, info = env.reset(seed=0, options={"task_id": task_id})
        return [info["anchor"], *(env.step(action)[4]["anchor"] for action in actions)]

    forward = anchors(["pull[0]", "pull[1]", "pull[2]", "bogus"])
    assert forward[-1] == anchors(["bogus", "pull[2]", "pull[1]", "pull[0]"])[-1]
    assert len(set(forward)) == len(forward), "every pull changes the state"
    assert anchors(["pull[0]", "pull[0]"])[-1] != anchors(["pull[0]", "pull[1]"])[-1]
    assert anchors(["pull[0]", "bogus"])[-1] != anchors(["pull[0]"])[-1], "a wasted pull leaves fewer pulls"
    assert anchors([], GAUSSIAN)[0] != forward[0]


def test_score_is_the_progress_so_far_on_every_step(env):
    _, info = env.reset(seed=0, options={"task_id": BERNOULLI})
    assert info["score"] == 0.0
    best = int(np.argmax(env.task["means"]))
    worst = int(np.argmin(env.task["means"]))
    assert env.step(f"pull[{best}]")[4]["score"] == 1.0
    assert env.step(f"pull[{worst}]")[4]["score"] < 1.0


def test_state_restore_continues_identically(env):
    env.reset(seed=4, options={"task_id": GAUSSIAN})
    for arm in (0, 1, 2):
        env.step(f"pull[{arm}]")
    state = env.get_state()
    expected = env.step("pull[3]")
    other = agentenvs.make("bandit")
    other.set_state(state)
    assert other.step("pull[3]") == expected


def test_unknown_task_names_real_ids(env):
    with pytest.raises(UnknownTask, match="bernoulli-k2-test-000"):
        env.reset(options={"task_id": "nope"})


# ---------------------------------------------------------------------- a worse arm never pays more (TextArena #173)


@pytest.mark.parametrize("task_id", [BERNOULLI, "bernoulli-k10-test-003"])
def test_bernoulli_payoff_is_monotone_in_the_mean_on_every_turn(env, task_id):
    """Common random numbers: on the same turn a better Bernoulli arm pays at least what a worse one pays."""
    for seed in range(20):
        env.reset(seed=seed, options={"task_id": task_id})
        order = np.argsort(env.task["means"])
        for turn in range(env.task["horizon"]):
            payoffs = [env.payoff(int(arm), turn) for arm in order]
            assert payoffs == sorted(payoffs)


@pytest.mark.parametrize("task_id", [BERNOULLI, GAUSSIAN])
def test_expected_reward_is_monotone_in_the_true_mean(env, task_id):
    """Always pulling one arm over many seeds: the mean reward ranks the arms as their true means do."""
    env.reset(seed=0, options={"task_id": task_id})
    means = np.asarray(env.task["means"])
    rewards = {arm: [] for arm in range(len(means))}
    for seed in range(60):
        for arm in rewards:
            env.reset(seed=seed, options={"task_id": task_id})
            rewards[arm] += [env.step(f"pull[{arm}]")[1] for _ in range(env.task["horizon"])]
    empirical = np.array([np.mean(rewards[arm]) for arm in rewards])
    error = np.array([np.std(rewards[arm]) / math.sqrt(len(rewards[arm])) for arm in rewards])
    assert np.abs(empirical - means).max() < 5 * error.max()
    for better in range(len(means)):
        for worse in range(len(means)):
            if means[better] > means[worse]:
                assert empirical[better] > empirical[worse], (means[better], means[worse])


def test_step_regret_and_score_rank_arms_by_their_mean(env):
    env.reset(seed=0, options={"task_id": GAUSSIAN})
    means = env.task["means"]
    regrets, scores = [], []
    for arm in range(len(means)):
        env.reset(seed=0, options={"task_id": GAUSSIAN})
        while True:
            _, _, terminated, truncated, info = env.step(f"pull[{arm}]")
            if terminated or truncated:
                break
        regrets.append(info["metrics"]["expected_regret"])
        scores.append(info["score"])
    order = np.argsort(means)
    assert [regrets[i] for i in order] == sorted(regrets, reverse=True)
    assert [scores[i] for i in order] == sorted(scores)
    assert regrets[int(order[-1])] == 0.0 and scores[int(order[-1])] == 1.0


# ---------------------------------------------------------------------- observation parser and baselines


def test_observation_parses_back_to_the_history(env):
    env.reset(seed=0, options={"task_id": GAUSSIAN})
    steps = [env.step(action) for action in ("pull[1]", "pull[1]", "pull[4]", "junk")]
    rewards = [step[1] for step in steps]
    view = parse_observation(steps[-1][0])
    assert view.distribution == "gaussian" and view.arms == tuple(env.task["arms"])
    assert view.counts == (0, 2, 0, 0, 1) and view.pulls_left == 56 and view.horizon == 60
    assert view.means[1] == pytest.approx((rewards[0] + rewards[1]) / 2, abs=5e-4)
    with pytest.raises(ValueError, match="not a bandit observation"):
        parse_observation("hello")


def test_baselines_are_deterministic_per_seed():
    for cls in BASELINES.values():
        first = play_episode(cls(seed=1), task_id=BERNOULLI)
        assert play_episode(cls(seed=1), task_id=BERNOULLI) == first
    assert play_episode(RandomPolicy(seed=1), task_id=BERNOULLI) != play_episode(
        RandomPolicy(seed=2), task_id=BERNOULLI
    )


def test_ucb1_and_thompson_have_much_lower_regret_than_random_on_the_test_panel(env):
    task_ids = [task["task_id"] for task in env.tasks("test")]
    regret = {
        cls.name: np.array([o["expected_regret"] for o in play_episodes(cls(seed=0), [(t, 0) for t in task_ids])])
        for cls in (RandomPolicy, UCB1Policy, ThompsonPolicy)
    }
    for name in ("ucb1", "thompson"):
        difference = regret["random"] - regret[name]
        t_statistic = difference.mean() / (difference.std(ddof=1) / math.sqrt(len(difference)))
        assert regret[name].mean() < 0.75 * regret["random"].mean(), name
        assert t_statistic > 5, (name, t_statistic)
    assert regret["thompson"].mean() < regret["ucb1"].mean()


def test_unicode_look_alikes_never_name_an_arm():
    assert parse_action("\u017filver", ["silver"]) is None  # long s, which unicode case folding maps to s
    assert parse_action("\u212aiwi", ["kiwi"]) is None  # Kelvin sign
    assert find_action("I pick \u017filver", ["silver"]).action == "I pick \u017filver"  # reported as invalid

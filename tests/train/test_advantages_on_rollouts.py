"""GiGPO on the records the rollout driver really writes, checked against an independent replay.

Unit tests build records by hand; these build them through ``run_rollouts`` (a random player, so group
members diverge and meet again), then replay every episode's actions in a fresh environment, read the
anchor of the state before each action, and require GiGPO's step groups to be the groups of those
pre-action anchors. A step group must compare different actions taken in one state: the old convention
(grouping by the info's anchor, the state an action reached) fails this on both environments.
"""

from __future__ import annotations

import pytest

import agentenvs
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.rollout.scripted import RandomPolicy
from agentenvs.train import advantages as adv

CASES = {
    "bandit": {"split": "test", "max_turns": 6},
    "textworld": {"split": "demo", "max_turns": 8},
}


def rollouts(name: str) -> list[EpisodeRecord]:
    case = CASES[name]
    config = RolloutConfig(concurrency=4, max_turns=case["max_turns"], progress=False)
    return run_rollouts(name, RandomPolicy(seed=3), n=3, group_size=4, split=case["split"], seed=11, config=config)


def replayed_anchors(name: str, record: EpisodeRecord) -> list[str]:
    """The anchor of the state before each of the record's actions, from a fresh environment."""
    env = agentenvs.make(name, max_turns=CASES[name]["max_turns"])
    try:
        _, info = env.reset(seed=record.seed, options={"split": record.split, "task_id": record.task_id})
        anchors = []
        for step in record.steps:
            anchors.append(str(info["anchor"]))
            _, _, _, _, info = env.step(step.action)
        return anchors
    finally:
        env.close()


def comparing(groups: list[list[tuple[int, int]]], records: list[EpisodeRecord]) -> int:
    """How many steps sit in a step group that compares at least two different actions."""
    return sum(
        len(group) for group in groups if len({records[i].steps[t].action for i, t in group}) > 1 and len(group) > 1
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_gigpo_step_groups_are_the_groups_of_pre_action_anchors_found_by_replay(name):
    records = rollouts(name)
    group_ids = [r.group_id for r in records]
    used = adv.step_groups([adv.action_states(r) for r in records], group_ids)
    replayed = adv.step_groups([replayed_anchors(name, r) for r in records], group_ids)
    assert used == replayed
    # every group's members start in its reset state, so their first actions share one step group
    for gid in set(group_ids):
        firsts = {(i, 0) for i, g in enumerate(group_ids) if g == gid}
        assert any(set(group) >= firsts for group in used)
    # the convention that grouped by the state reached compares fewer different actions
    reached = adv.step_groups([[str(s.info["anchor"]) for s in r.steps] for r in records], group_ids)
    assert reached != used
    assert comparing(used, records) > comparing(reached, records)

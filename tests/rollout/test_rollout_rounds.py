"""The driver's rounds against real servers on 127.0.0.1: the same records as threads, in batch calls."""

from __future__ import annotations

import gc

import pytest
from conftest import FLAKY_SERVE_ARG, PYTHONPATH
from test_rollout_driver import Scripted, comparable

from agentenvs.client import EnvPool
from agentenvs.errors import InvalidArgument
from agentenvs.rollout.collector import FULL_COLLECTIONS_HELD
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.rounds import can_play_in_rounds
from agentenvs.rollout.scripted import ExpertPolicy, RandomPolicy
from agentenvs.servers.launch import launch_server


class CountingPool(EnvPool):
    """An EnvPool that remembers the size of every ``step_many`` it was asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []
        self.opened = 0

    def make(self, name, **kwargs):
        self.opened += 1
        return super().make(name, **kwargs)

    def step_many(self, envs, actions):
        self.batches.append(len(envs))
        return super().step_many(envs, actions)


@pytest.fixture(scope="module")
def urls():
    started = []
    try:
        for _ in range(2):
            started.append(launch_server(["bandit", FLAKY_SERVE_ARG], workers=2, env_vars=PYTHONPATH))
        yield [s.url for s in started]
    finally:
        for server in started:
            server.stop()


def config(schedule: str, concurrency: int = 8, **kwargs) -> RolloutConfig:
    return RolloutConfig(progress=False, concurrency=concurrency, schedule=schedule, **kwargs)


def test_rounds_give_the_records_of_threads_in_batch_calls(urls):
    threads = run_rollouts("bandit", RandomPolicy(), n=6, group_size=2, config=config("threads"), servers=urls)
    with CountingPool(urls) as pool:
        rounds = run_rollouts("bandit", RandomPolicy(), n=6, group_size=2, config=config("rounds"), servers=pool)
    assert [comparable(r) for r in rounds] == [comparable(r) for r in threads]
    steps = sum(r.num_turns for r in rounds)
    assert sum(pool.batches) == steps + len(rounds), "every step and every episode's reset went in a batch call"
    assert max(pool.batches) > 1
    assert len(pool.batches) < steps / 2, f"{len(pool.batches)} calls for {steps} steps"
    assert max(pool.batches) <= 8 and pool.opened == 8, "no more episodes in play than the concurrency"


def test_auto_plays_scripted_policies_in_rounds_and_model_policies_in_threads(urls):
    with CountingPool(urls) as pool:
        assert can_play_in_rounds(RandomPolicy(), pool) and can_play_in_rounds(ExpertPolicy(), pool)
        assert not can_play_in_rounds(Scripted(), pool), "a model policy waits on its model: threads"
        assert not can_play_in_rounds(RandomPolicy(), None), "in-process environments have no batch step"
        expert = run_rollouts("bandit", ExpertPolicy(), n=3, config=config("auto"), servers=pool)
        assert all(r.success for r in expert) and pool.batches
        pool.batches.clear()
        run_rollouts("bandit", Scripted("pull[0]"), n=2, config=config("auto", max_turns=3), servers=pool)
        assert pool.batches == [], "a blocking policy steps on its own thread"


def test_a_failing_session_fails_only_its_episode(urls):
    records = run_rollouts("flaky", Scripted(), n=4, config=config("rounds"), servers=urls)
    by_task = {r.task_id: r.failure_cause for r in records}
    assert by_task == {"steady": "none", "fail-at-2": "infra"}
    assert all(r.num_turns == 3 for r in records if r.task_id == "steady")


def test_rounds_keep_time_limits_and_need_servers(urls):
    [record] = run_rollouts(
        "bandit", Scripted("pull[0]", pause_s=0.3), n=1, config=config("rounds", time_limit_s=0.5), servers=urls
    )
    assert record.failure_cause == "timeout" and 1 <= record.num_turns <= 2
    with pytest.raises(InvalidArgument, match="schedule"):
        RolloutConfig(schedule="lockstep")


def test_a_run_in_rounds_holds_off_full_collections_and_gives_the_threshold_back(urls):
    held = []

    class WatchedPool(EnvPool):
        def step_many(self, envs, actions):
            held.append(gc.get_threshold()[2] == FULL_COLLECTIONS_HELD)
            return super().step_many(envs, actions)

    before = gc.get_threshold()
    with WatchedPool(urls) as pool:
        records = run_rollouts("bandit", RandomPolicy(), n=24, config=config("rounds"), servers=pool)
    assert len(records) == 24 and gc.get_threshold() == before, "the threshold comes back after the run"
    assert held and all(held), "every batch call of the run went while full collections waited"

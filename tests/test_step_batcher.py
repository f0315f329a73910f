"""Client-side step batching against a real server on 127.0.0.1: same answers, fewer calls, errors kept apart."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentenvs
from agentenvs import errors
from agentenvs.protocol import Reset
from agentenvs.servers.launch import ServerProcess, launch_server

ROLLOUT_TESTS = Path(__file__).resolve().parent / "rollout"
FLAKY_SERVE_ARG = "flaky=rollout_envs_for_tests:FlakyEnv"
"""The driver tests' environment whose engine crashes on a chosen turn."""
PYTHONPATH = {"PYTHONPATH": str(ROLLOUT_TESTS)}


@pytest.fixture(scope="module")
def servers() -> Iterator[list[ServerProcess]]:
    started = [launch_server(["bandit", FLAKY_SERVE_ARG], workers=2, env_vars=PYTHONPATH) for _ in range(2)]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


def _play(envs: list, actions_per_env: int) -> list[list[tuple]]:
    """Step every env ``actions_per_env`` times, each from its own thread at once; the answers per env."""
    answers: list[list[tuple]] = [[] for _ in envs]
    barrier = threading.Barrier(len(envs))

    def run(index: int) -> None:
        barrier.wait()
        for turn in range(actions_per_env):
            answers[index].append(envs[index].step(f"pull[{(index + turn) % 2}]")[:4])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(envs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_concurrent_steps_share_calls_and_answer_as_single_steps(servers):
    url = servers[0].url
    batched, plain = agentenvs.connect(url, batch_steps=True), agentenvs.connect(url)
    results = []
    for client in (batched, plain):
        envs = [client.make("bandit") for _ in range(16)]
        for index, env in enumerate(envs):
            env.reset(seed=index)
        results.append(_play(envs, 5))
        for env in envs:
            env.close()
    assert results[0] == results[1], "batched steps must answer exactly as single steps"
    stats = batched.batcher.stats()
    assert stats["steps"] == 80 and stats["calls"] < 80, f"16 threads stepping at once made no batch: {stats}"


def test_a_lone_step_goes_at_once_on_the_single_route(servers):
    client = agentenvs.connect(servers[0].url, batch_steps=True)
    env = client.make("bandit")
    env.reset(seed=3)
    env.step("pull[0]")
    assert client.batcher.stats() == {"steps": 1, "calls": 1, "mean_batch": 1.0}
    env.close()


def test_a_failing_session_fails_only_its_own_step(servers):
    client = agentenvs.connect(servers[0].url, batch_steps=True)
    good = [client.make("bandit") for _ in range(3)]
    flaky = client.make("flaky")
    for index, env in enumerate(good):
        env.reset(seed=index)
    flaky.reset(seed=0, options={"task_id": "fail-at-2"})
    flaky.step("good")
    outcomes: dict[str, object] = {}
    barrier = threading.Barrier(4)

    def run(name: str, env, action: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = env.step(action)[1]
        except errors.AgentEnvsError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(f"good{i}", env, "pull[0]")) for i, env in enumerate(good)]
    threads.append(threading.Thread(target=run, args=("flaky", flaky, "good")))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert isinstance(outcomes.pop("flaky"), errors.AgentEnvsError)
    assert all(isinstance(reward, float) for reward in outcomes.values()), outcomes


def test_env_pool_steps_many_sessions_over_servers_in_order(servers):
    with agentenvs.EnvPool([s.url for s in servers], strategy="round_robin") as pool:
        envs = pool.make_many("bandit", 6)
        assert set(pool.load().values()) == {3}
        for index, env in enumerate(envs):
            env.reset(seed=index)
        expected = []
        with agentenvs.EnvPool([s.url for s in servers], strategy="round_robin") as alone:
            twins = alone.make_many("bandit", 6)
            for index, env in enumerate(twins):
                env.reset(seed=index)
                expected.append(env.step(f"pull[{index % 2}]")[:4])
        answers = pool.step_many(envs, [f"pull[{i % 2}]" for i in range(6)])
        assert [a[:4] for a in answers] == expected
        assert all(env.turn == 1 for env in envs)
        with pytest.raises(errors.InvalidArgument):
            pool.step_many(envs, ["pull[0]"])


def test_step_many_resets_the_sessions_given_a_reset_in_the_same_call(servers):
    """A ``Reset`` in place of an action starts that session's episode as ``env.reset`` does."""
    with agentenvs.EnvPool([s.url for s in servers], strategy="round_robin") as pool:
        envs = pool.make_many("bandit", 4)
        twins = pool.make_many("bandit", 4)
        for env in envs[:2]:
            env.reset(seed=9)
        envs[0].step("pull[0]")
        actions = ["pull[1]", Reset(seed=5), Reset(seed=6, options={"split": "test"}), Reset()]
        answers = pool.step_many(envs, actions)
        assert answers[0][4]["turn"] == 2 and envs[0].turn == 2
        assert answers[1] == twins[1].reset(seed=5) and answers[2] == twins[2].reset(seed=6, options={"split": "test"})
        assert answers[3][1]["turn"] == 0 and all(env.turn == 0 and not env.done for env in envs[1:])
        assert pool.step_many(envs[1:3], ["pull[0]", "pull[0]"]) == [twins[1].step("pull[0]"), twins[2].step("pull[0]")]

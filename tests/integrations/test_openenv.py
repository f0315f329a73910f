"""``agentenvs serve`` speaks OpenEnv's WebSocket protocol beside protocol v1: openenv-core's own client
plays bandit episodes over a real loopback socket, and they match the same episodes played in-process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import agentenvs
from agentenvs.servers.launch import ServerProcess, launch_server


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = launch_server(["bandit"], workers=1)
    try:
        yield process
    finally:
        process.stop()


def test_openenv_client_plays_an_episode_like_the_local_env(server):
    from agentenvs.integrations.openenv import openenv_client

    local = agentenvs.make("bandit")
    first, info = local.reset(seed=5, options={"split": "test"})
    expected = [local.step(a)[1:3] for a in ("pull[0]", "pull[1]", "")]
    with openenv_client(server.url, "bandit") as env:
        result = env.reset(seed=5, split="test")
        assert result.observation["text"] == first and result.done is False and result.reward is None
        assert result.observation["info"]["task_id"] == info["task_id"]
        assert result.observation["instructions"].startswith("You are playing a multi-armed bandit")
        steps = [
            env.step({"action": "pull[0]"}),
            env.step({"message": "I will try pull[1] now."}),
            env.step({"action": ""}),
        ]
        assert [s.observation["action"] for s in steps] == ["pull[0]", "pull[1]", ""]
        assert [(s.reward, s.done) for s in steps] == [(r, bool(t)) for r, t in expected]
        assert steps[2].observation["info"]["action_valid"] is False
        state = env.state()
        assert state["step_count"] == 3 and state["env"] == "bandit"
    # the socket's session closes with it, and protocol v1 serves the same episode on the same server
    client = agentenvs.connect(server.url)
    deadline = time.monotonic() + 10
    while client.health()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.health()["sessions"] == 0
    remote = client.make("bandit")
    assert remote.reset(seed=5, options={"split": "test"})[0] == first
    assert remote.step("pull[0]")[1] == expected[0][0]
    remote.close()


def test_openenv_errors_come_back_as_openenv_errors(server):
    from agentenvs.integrations.openenv import openenv_client

    with openenv_client(server.url, "bandit") as env:
        env.reset(seed=1)
        with pytest.raises(RuntimeError, match="action"):
            env.step({"code": "x"})
    with pytest.raises(RuntimeError, match="no environment named"), openenv_client(server.url, "nope") as env:
        env.reset()

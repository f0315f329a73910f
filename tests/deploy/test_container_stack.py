"""Every image builds, the compose stack comes up healthy, plays an episode of each environment and leaves nothing.

Slow and needs podman (or docker): ``make test-containers``. The stack's ports are free loopback ports
and its token is fresh; ``EnvPool`` and the retriever's ``/retrieve`` are exercised through it too.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request

import pytest

from agentenvs.containers import ENVIRONMENTS, TARGETS
from agentenvs.containers.images import build_all
from agentenvs.containers.stack import Stack, play_all

pytestmark = [
    pytest.mark.containers,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not (shutil.which("podman") or shutil.which("docker")), reason="no podman or docker"),
]


@pytest.fixture(scope="module")
def stack():
    report = build_all(TARGETS)
    assert set(report["images"]) == set(TARGETS) and all(i["bytes"] > 0 for i in report["images"].values())
    running = Stack()
    try:
        running.cold_start = running.wait_healthy(running.up(), timeout=600)
        yield running
    finally:
        running.down()
        left = running.leftovers()
        assert left == {"containers": [], "networks": [], "volumes": []}, left


def retrieve(stack: Stack, token: str | None) -> int:
    request = urllib.request.Request(
        f"{stack.url('retriever')}/retrieve",
        data=json.dumps({"queries": ["population"], "topk": 2}).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert len(json.load(answer)["result"][0]) == 2
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_every_server_is_healthy_and_the_engine_agrees(stack: Stack) -> None:
    assert set(stack.cold_start) == set(TARGETS)
    verdicts = stack.health_status()
    assert all(v == "healthy" for v in verdicts.values()), verdicts


def test_one_expert_episode_of_every_environment(stack: Stack) -> None:
    episodes = play_all(stack, ENVIRONMENTS)
    assert {env for env, e in episodes.items() if not (e["done"] and e["success"])} == set(), episodes


def test_env_pool_and_the_token_work_unchanged(stack: Stack) -> None:
    from agentenvs.client import EnvPool

    pool = EnvPool([stack.url("bandit")], stack.token)
    try:
        envs = [pool.make("bandit") for _ in range(2)]
        for seed, env in enumerate(envs):
            observation, _ = env.reset(seed=seed)
            assert observation
    finally:
        pool.close()
    assert retrieve(stack, stack.token) == 200
    assert retrieve(stack, "wrong-token") == 401

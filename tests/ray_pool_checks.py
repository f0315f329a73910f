"""RayEnvPool on a local one-node Ray, run by ``test_ray_pool.py`` inside a private network namespace.

Not collected on its own (its name does not start with ``test_``): Ray listens on every interface, so
these checks only ever run where the only interface is loopback.
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentenvs.errors import EpisodeOver
from agentenvs.protocol import Reset
from agentenvs.ray_pool import RayEnvPool, SessionLost
from agentenvs.registry import make
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.scripted import RandomPolicy
from agentenvs.testing import check_text_env


@pytest.fixture(scope="module")
def pool():
    with RayEnvPool(num_cpus=1, sessions_per_actor=4) as started:
        yield started


def test_a_ray_env_passes_the_conformance_suite(pool):
    report = check_text_env(functools.partial(pool.make, "bandit"))
    assert not report.failures and "restore" in report.passed


def test_step_many_answers_as_in_process_with_one_call_per_actor(pool):
    envs = pool.make_many("bandit", 6)
    twins = [make("bandit") for _ in envs]
    for index, (env, twin) in enumerate(zip(envs, twins, strict=True)):
        assert env.reset(seed=index)[0] == twin.reset(seed=index)[0]
    actions = [f"pull[{i % 3}]" for i in range(6)]
    answers = pool.step_many(envs, actions)
    assert [a[:4] for a in answers] == [twin.step(a)[:4] for twin, a in zip(twins, actions, strict=True)]
    assert len({env.host.handle for env in envs}) == 2, "six sessions, four per actor: two actors"
    for env in envs:
        env.close()


def test_step_many_resets_sessions_given_a_reset(pool):
    envs = pool.make_many("bandit", 3)
    twin = make("bandit")
    envs[0].reset(seed=2)
    answers = pool.step_many(envs, ["pull[0]", Reset(seed=4), Reset(seed=4, options={"split": "test"})])
    assert answers[0][4]["turn"] == 1 and answers[1] == twin.reset(seed=4)
    assert answers[2] == twin.reset(seed=4, options={"split": "test"}) and envs[2].turn == 0
    for env in envs:
        env.close()


def test_one_sessions_error_comes_back_as_its_item(pool):
    finished, going = pool.make("bandit", max_turns=1), pool.make("bandit")
    for env in (finished, going):
        env.reset(seed=1)
    finished.step("pull[0]")
    assert finished.done
    over, fine = pool.step_many([finished, going], ["pull[0]", "pull[0]"])
    assert isinstance(over, EpisodeOver) and isinstance(fine[1], float)


def test_a_dead_actor_fails_only_its_sessions_and_reset_replaces_them(pool):
    envs = pool.make_many("bandit", 8)
    for index, env in enumerate(envs):
        env.reset(seed=index)
    victim = envs[0].host
    pool.ray.kill(victim.handle)
    _wait_until_dead(pool, victim.handle)
    answers = pool.step_many(envs, ["pull[0]"] * 8)
    lost = [env for env, answer in zip(envs, answers, strict=True) if isinstance(answer, SessionLost)]
    assert lost and all(env.host is victim for env in lost), "only the killed actor's sessions fail"
    assert all(not isinstance(a, Exception) for env, a in zip(envs, answers, strict=True) if env.host is not victim)
    assert {f.session_id for f in pool.failures} >= {env.session_id for env in lost}
    lost[0].reset(seed=3)
    assert lost[0].host is not victim and lost[0].step("pull[0]")[0], "reset opened a replacement session"
    (again,) = pool.step_many(lost[1:2], [Reset(seed=3)])
    assert lost[1].host is not victim and again[0], "a Reset in step_many also opens a replacement"
    for env in envs:
        env.close()


def _wait_until_dead(pool, handle, timeout_s: float = 30.0) -> None:
    """``ray.kill`` is asynchronous: a call sent right after it may still be answered."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pool.ray.get(handle.node_id.remote(), timeout=5)
        except pool.ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the killed actor still answers after {timeout_s:g} s")


def test_the_rollout_driver_plays_ray_sessions_in_rounds_as_in_process(pool):
    config = RolloutConfig(progress=False, concurrency=6)
    local = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=config)
    remote = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=config, servers=pool)
    assert [_without(r, "timings", "started_at") for r in remote] == [
        _without(r, "timings", "started_at") for r in local
    ]


def _without(record, *keys: str) -> dict:
    data = record.to_dict()
    for key in keys:
        data.pop(key)
    return data


def test_token_auth_is_on_and_a_wrong_token_is_refused(pool, tmp_path: Path):
    token_file = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert os.environ["RAY_AUTH_MODE"] == "token" and stat.S_IMODE(token_file.stat().st_mode) == 0o600
    address = pool.ray.get_runtime_context().gcs_address
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    probe = f"import ray; ray.init(address={address!r}); print('connected')"
    env = os.environ | {"RAY_AUTH_TOKEN_PATH": str(wrong)}
    answer = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert "connected" not in answer.stdout and "AuthenticationError" in answer.stderr + answer.stdout

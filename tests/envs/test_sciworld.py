"""ScienceWorld on the real JVM: the contract, the expert on every test-panel task, fidelity to the
package's own wrapper, rewards, failure, admissible actions, and the JVM's lifecycle (death,
restart, no orphans after close, a crash, or a fork)."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

import agentenvs
from agentenvs import panels
from agentenvs.envs.sciworld.env import ScienceWorldEnv, parse_simplifications, task_turn_limit
from agentenvs.envs.sciworld.jvm import find_orphan_jvms, java_options
from agentenvs.errors import EnvFailed, InvalidArgument
from agentenvs.info import check_info
from agentenvs.testing import CHECKS, check_text_env

pytestmark = pytest.mark.slow

SHORT_TASK = "find-animal"
"""Ten-step gold paths: the cheapest task to play through."""


@pytest.fixture(scope="module")
def env() -> ScienceWorldEnv:
    """One privileged environment (one JVM) shared by the tests that only reset and step."""
    environment = agentenvs.make("sciworld", privileged=True)
    yield environment
    environment.close()


def short_task(split: str = "test") -> dict:
    return next(t for t in panels.load_panel("sciworld", split) if t["task_name"] == SHORT_TASK)


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def play(environment, actions):
    total, steps = 0.0, []
    for action in actions:
        observation, reward, terminated, truncated, info = environment.step(action)
        total += reward
        steps.append((observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return total, steps


# ---------------------------------------------------------------------- panels


def test_panels_follow_the_package_splits_with_five_test_variations_per_task():
    test = panels.load_panel("sciworld", "test")
    per_task = Counter(t["task_name"] for t in test)
    sizes = panels.read_manifest("sciworld")["package_split_sizes"]
    assert len(per_task) == 30 and all(count == min(5, sizes[name]["test"]) for name, count in per_task.items())
    assert len(test) == 149, "5 per task; identify-life-stages-2 has only 4 test variations in the package"
    assert all(t["sw_split"] == "test" and t["task_id"] == f"{t['task_name']}-v{t['variation']}" for t in test)
    assert all(t["gold"] and t["task_type"] == t["task_name"] for t in test)
    dev = panels.load_panel("sciworld", "dev")
    assert {t["sw_split"] for t in dev} == {"dev"} and len({t["task_name"] for t in dev}) == 30
    train = panels.load_panel("sciworld", "train")
    assert {t["sw_split"] for t in train} == {"train"}
    ids = [{t["task_id"] for t in split} for split in (test, dev, train)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert all(task_turn_limit(t) >= 2 * t["gold_length"] for t in test)
    assert task_turn_limit(train[0]) == ScienceWorldEnv.default_max_turns


# ---------------------------------------------------------------------- the contract


JVM_HEAVY = pytest.mark.timeout(1800)
"""The conformance suite starts about ten JVMs; on a busy shared machine that takes many minutes."""


@JVM_HEAVY
def test_anchor_check_on_tasks_that_start_between_two_closed_doors():
    """Seeds 1 and 3 draw tasks that start in a room with two or more closed doors (seed 0's has one)."""
    others = tuple(check for check in CHECKS if check != "anchor")
    report = check_text_env(functools.partial(agentenvs.make, "sciworld"), seeds=(1, 3), skip=others)
    assert report.passed == ["anchor"]


@JVM_HEAVY
def test_conformance_suite_through_the_http_server():
    from agentenvs.servers.launch import launch_server

    with launch_server(["sciworld"], workers=2) as server:
        client = agentenvs.connect(server.url)
        try:
            check_text_env(functools.partial(client.make, "sciworld"), seeds=(0,), max_steps=15, fuzz_examples=15)
        finally:
            client.close()


# ---------------------------------------------------------------------- the expert and the engine


def expert_failures(environment, tasks) -> dict:
    """Replay each task's expert plan; the tasks where it does not end in success with score 1.0."""
    failures = {}
    for task in tasks:
        _, info = environment.reset(seed=0, options={"task_id": task["task_id"]})
        total, steps = play(environment, info["privileged"]["expert_plan"])
        final = steps[-1][4]
        if not (final.get("success") and final["score"] == 1.0 and final["raw_score"] == 100):
            failures[task["task_id"]] = (final["raw_score"], final.get("end_reason"), len(steps))
        elif abs(info["score"] + total - 1.0) > 1e-9:
            failures[task["task_id"]] = ("score at reset + dense return", info["score"], total)
    return failures


@JVM_HEAVY
def test_expert_reaches_score_one_on_every_test_panel_task(env):
    """All 149 tasks, on two JVMs in two threads (one per core); the plans come from the panel and are
    replayed on freshly loaded worlds."""
    tasks = panels.load_panel("sciworld", "test")
    second = agentenvs.make("sciworld", privileged=True)
    try:
        with ThreadPoolExecutor(2) as pool:
            halves = pool.map(expert_failures, (env, second), (tasks[0::2], tasks[1::2]))
            failures = {k: v for half in halves for k, v in half.items()}
    finally:
        second.close()
    assert not failures, f"the expert failed on {len(failures)} tasks: {failures}"


STARTS_WITH_POINTS = "lifespan-shortest-lived-v118"
"""A world whose score is 50 before the first step; the wrapper's reward counts from there, as ours does."""


def test_observations_match_the_package_wrapper(monkeypatch):
    """Our raw-call stepping gives the package's ``ScienceWorldEnv.step`` observations, rewards and ends."""
    import scienceworld.scienceworld as wrapper_module

    original = wrapper_module.launch_gateway
    monkeypatch.setattr(wrapper_module, "launch_gateway", functools.partial(original, javaopts=java_options()))
    short = short_task()
    with_points = next(t for t in panels.load_panel("sciworld", "test") if t["task_id"] == STARTS_WITH_POINTS)
    plays = [
        (short, [*short["gold"][:3], "fly to the moon", *short["gold"][3:]]),
        (with_points, ["fly to the moon", *with_points["gold"]]),
    ]
    wrapper = wrapper_module.ScienceWorldEnv("", envStepLimit=1000)
    ours = agentenvs.make("sciworld")
    try:
        for task, actions in plays:
            wrapper.load(task["task_name"], task["variation"], "")
            expected_first, _ = wrapper.reset()
            observation, info = ours.reset(seed=0, options={"task_id": task["task_id"]})
            assert observation == f"{wrapper.taskdescription()}\n\n{expected_first}"
            total = info["score"]
            for action in actions:
                want_obs, want_reward, want_done, want_info = wrapper.step(action)
                obs, reward, terminated, _, info = ours.step(action)
                total += reward
                assert obs == want_obs
                assert info["raw_score"] == want_info["score"]
                assert round(reward * 100) == want_reward
                assert terminated == want_done
                assert info["action_valid"] == (action != "fly to the moon")
                if terminated:
                    break
            assert info["success"]
            assert abs(total - 1.0) < 1e-9, total
    finally:
        ours.close()
        wrapper.close()


def test_same_task_is_identical_across_resets(env):
    task = short_task()
    first = env.reset(seed=1, options={"task_id": task["task_id"]})
    run_one = play(env, task["gold"][:5])
    again = env.reset(seed=2, options={"task_id": task["task_id"]})
    run_two = play(env, task["gold"][:5])
    assert first == again and run_one == run_two


def test_sparse_reward_pays_the_final_score_on_the_last_step_only():
    task = short_task()
    sparse = agentenvs.make("sciworld", reward="sparse")
    try:
        sparse.reset(seed=0, options={"task_id": task["task_id"]})
        total, steps = play(sparse, task["gold"])
        assert [s[1] for s in steps[:-1]] == [0.0] * (len(steps) - 1) and steps[-1][1] == 1.0 == total
        assert steps[-1][4]["milestones"], "milestones are kept in sparse mode too"
    finally:
        sparse.close()


def test_dense_reward_is_the_score_increase_with_a_milestone_at_each(env):
    task = short_task()
    env.reset(seed=0, options={"task_id": task["task_id"]})
    _, steps = play(env, task["gold"])
    scores = [s[4]["raw_score"] for s in steps]
    best, expected = 0, []
    for score in scores:
        if score > best:
            best = score
            expected.append(f"score-{score}")
    assert steps[-1][4]["milestones"] == expected and len(expected) >= 2
    for (_, reward, *_rest), before, after in zip(steps, [0, *scores], scores, strict=False):
        assert reward == pytest.approx((after - before) / 100)


def test_progress_the_room_does_not_show_changes_the_anchor(env):
    """Examining the stopwatch and focusing on the plane raise the score with the same look and inventory."""
    task = next(t for t in panels.load_panel("sciworld", "test") if t["task_id"].startswith("inclined-plane-friction"))
    _, info = env.reset(seed=0, options={"task_id": task["task_id"]})
    changed = 0
    for _, _, _, _, after in play(env, task["gold"])[1]:
        if after["raw_score"] != info["raw_score"]:
            changed += 1
            assert after["anchor"] != info["anchor"], f"the score went {info['raw_score']} -> {after['raw_score']}"
        info = after
    assert changed >= 3


def test_focusing_on_the_wrong_thing_fails_the_task(env):
    task = short_task()
    env.reset(seed=0, options={"task_id": task["task_id"]})
    observation, reward, terminated, truncated, info = env.step("focus on air")
    assert terminated and not truncated, observation
    assert info["end_reason"] == "failure" and info["success"] is False
    assert info["raw_score"] < 0 and info["score"] == 0.0 and reward == 0.0
    assert check_info(info) == []


def test_expert_plan_is_privileged():
    plain = agentenvs.make("sciworld")
    try:
        _, info = plain.reset(seed=0, options={"task_id": short_task()["task_id"]})
        assert "privileged" not in info and "admissible_actions" not in info
    finally:
        plain.close()


def test_expert_plan_of_a_train_task_is_planned_by_the_engine(env):
    task = short_task("train")
    _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": "train"})
    _, steps = play(env, info["privileged"]["expert_plan"])
    assert steps[-1][4]["success"]


def test_admissible_actions_only_when_asked_and_cached_per_state():
    task = short_task()
    listing = agentenvs.make("sciworld", admissible_actions=True)
    try:
        _, info = listing.reset(seed=0, options={"task_id": task["task_id"]})
        first = info["admissible_actions"]
        assert "look around" in first and first == sorted(first)
        cached = len(listing._admissible_cache)
        _, _, _, _, info = listing.step("fly to the moon")
        assert info["admissible_actions"] == first and len(listing._admissible_cache) == cached
        for action in task["gold"][:4]:
            _, _, _, _, info = listing.step(action)
            fresh = sorted(str(a) for a in listing.jvm.call("getValidActionObjectCombinations"))
            assert info["admissible_actions"] == fresh
    finally:
        listing.close()


def test_simplifications_are_checked_and_applied():
    assert parse_simplifications("easy")[0] == "teleportAction"
    with pytest.raises(InvalidArgument, match="openDoors"):
        agentenvs.make("sciworld", simplifications="open-doors")
    with pytest.raises(InvalidArgument, match="reward"):
        agentenvs.make("sciworld", reward="shaped")
    simple = agentenvs.make("sciworld", simplifications="openDoors,teleportAction", privileged=True)
    try:
        observation, info = simple.reset(seed=0, options={"task_id": short_task()["task_id"]})
        assert "closed" not in observation.split("You also see:")[-1]
        assert info["privileged"]["task_params"]["simplifications"] == "openDoors,teleportAction"
        assert check_info(info) == []
        _, _, _, _, info = simple.step("teleport to kitchen")
        assert info["action_valid"]
    finally:
        simple.close()


# ---------------------------------------------------------------------- the JVM's lifecycle


def test_a_dead_jvm_raises_env_failed_and_the_next_reset_restarts_it():
    environment = agentenvs.make("sciworld", max_turns=5)
    try:
        task = short_task()
        environment.reset(seed=0, options={"task_id": task["task_id"]})
        pid = environment.jvm.pid
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
        with pytest.raises(EnvFailed, match="reset"):
            environment.step("look around")
        with pytest.raises(EnvFailed, match="reset"):
            environment.step("look around")
        observation, _ = environment.reset(seed=0, options={"task_id": task["task_id"]})
        assert environment.jvm.pid != pid and environment.jvm.starts == 2 and "animal" in observation
        assert environment.step(task["gold"][0])[4]["action_valid"]
    finally:
        environment.close()


def test_close_ends_the_jvm():
    environment = agentenvs.make("sciworld")
    environment.reset(seed=0, options={"task_id": short_task()["task_id"]})
    pid = environment.jvm.pid
    memory = environment.memory_mb()
    assert 50 < memory["jvm_rss_mb"] < 1024 and memory["python_rss_mb"] > 10
    environment.close()
    assert wait_gone(pid, timeout=10)
    environment.close()


def test_java_objects_that_outlive_their_jvm_are_collected_without_reconnecting(caplog):
    """py4j would try to reconnect to free each one, logging a traceback from inside the garbage collector."""
    environment = agentenvs.make("sciworld")
    environment.reset(seed=0, options={"task_id": short_task()["task_id"]})
    leftover = environment.jvm._server
    pid = environment.jvm.pid
    environment.close()
    assert wait_gone(pid, timeout=10)
    with caplog.at_level("DEBUG", logger="py4j"):
        del leftover
        gc.collect()
    assert [record.getMessage() for record in caplog.records if record.name.startswith("py4j")] == []


OWNER = textwrap.dedent(
    """
    import os, sys, time
    import agentenvs
    env = agentenvs.make("sciworld")
    env.reset(seed=0, options={"task_id": sys.argv[1]})
    child = os.fork() if sys.argv[2] == "fork" else 0
    if child == 0 and sys.argv[2] == "fork":
        time.sleep(120)
        os._exit(0)
    print(env.jvm.pid, child, flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("mode", ["plain", "fork"])
def test_no_orphan_jvm_after_the_owner_is_killed(mode):
    """kill -9 of the owning Python process ends its JVM, also when a forked child outlives the owner."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, short_task()["task_id"], mode], stdout=subprocess.PIPE, text=True
    )
    child = 0
    try:
        line = owner.stdout.readline().split()
        assert line, "the owner process printed no JVM pid"
        jvm_pid, child = int(line[0]), int(line[1])
        assert psutil.pid_exists(jvm_pid)
        owner.kill()
        owner.wait(10)
        assert wait_gone(jvm_pid), f"JVM {jvm_pid} outlived its owner (mode {mode})"
        assert jvm_pid not in find_orphan_jvms()
    finally:
        if owner.poll() is None:
            owner.kill()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)

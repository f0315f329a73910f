"""ShellOps as an environment: the contract with real shell commands, the expert, info and metrics."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import agentenvs
from agentenvs.envs.shellops.env import parse_action
from agentenvs.envs.shellops.workspace import processes_of
from agentenvs.testing import check_text_env

COMMANDS = (
    "<bash>ls -R</bash>",
    "<bash>cd inventory && cat config.py</bash>",
    "<bash>echo $((6 * 7)) > answer.txt; cat answer.txt</bash>",
    "<bash>grep -rn def . | sort | tail -n 3</bash>",
    "<bash>cd /workspace; pwd</bash>",
    "<bash>false</bash>",
    "<bash>rm -f answer.txt</bash>",
    "look",
)


def shell_policy(observation: str, info: dict, rng: np.random.Generator) -> str:
    """Deterministic shell commands inside the workspace (no times, pids or /proc), so replays match byte for byte."""
    return COMMANDS[int(rng.integers(len(COMMANDS)))]


def test_shellops_passes_the_conformance_suite_with_real_commands():
    report = check_text_env(
        functools.partial(agentenvs.make, "shellops"), policy=shell_policy, max_steps=8, fuzz_examples=20
    )
    assert {"determinism", "restore", "anchor", "cross_process"} <= set(report.passed)


def play(env, task_id: str, actions: list[str], split: str = "demo") -> list[tuple]:
    env.reset(seed=0, options={"task_id": task_id, "split": split})
    steps = []
    for action in actions:
        steps.append(env.step(action))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


@pytest.mark.parametrize("split", ["test", "demo"])
def test_the_expert_plan_solves_every_shipped_task_and_a_wrong_submit_fails(split):
    env = agentenvs.make("shellops", privileged=True)
    try:
        for task in env.tasks(split):
            _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": split})
            last = play(env, task["task_id"], info["privileged"]["expert_plan"], split)[-1]
            assert last[1] == 1.0 and last[2] and last[4]["success"] and last[4]["score"] == 1.0, task["task_id"]
            wrong = play(env, task["task_id"], ["<submit>no idea</submit>"], split)[-1]
            assert wrong[1] == 0.0 and not wrong[4]["success"], task["task_id"]
    finally:
        env.close()


def test_score_counts_the_checks_that_pass_so_far():
    env = agentenvs.make("shellops")
    try:
        _, info = env.reset(seed=0, options={"task_id": "inventory-rename-format-report", "split": "demo"})
        assert info["score"] == 1 / 4  # every other file is kept; the renames are not made; imports wait for both
        rename = "<bash>sed -i 's/format_report/render_report/' inventory/{}.py</bash>"
        steps = play(env, "inventory-rename-format-report", [rename.format("__init__"), rename.format("report")])
        assert [step[4]["score"] for step in steps] == [1 / 4, 1.0]  # half renamed; then all, and it imports
    finally:
        env.close()


def test_the_random_baseline_is_a_seeded_menu_of_commands():
    env = agentenvs.make("shellops", privileged=True)
    try:
        drawn = []
        for _ in range(2):
            _, info = env.reset(seed=3, options={"task_id": "inventory-where-total-value", "split": "demo"})
            actions = [info["privileged"]["baseline_actions"]["random"]]
            while not actions[-1].startswith("<submit>"):
                actions.append(env.step(actions[-1])[4]["privileged"]["baseline_actions"]["random"])
            drawn.append(actions)
    finally:
        env.close()
    assert drawn[0] == drawn[1]
    assert all(re.fullmatch(r"<bash>(ls -R|cat \S+|grep -rn \S+ \.)</bash>", a) for a in drawn[0][:-1]), drawn[0]


def test_info_has_the_command_structure_and_the_metrics():
    env = agentenvs.make("shellops")
    try:
        env.reset(seed=0, options={"task_id": "inventory-count-py-files", "split": "demo"})
        _, _, _, _, info = env.step("<bash>find . -name '*.py' | wc -l > n.txt; false</bash>")
        assert info["parsed_action"] == {
            "programs": ["find", "wc", "false"],
            "pipes": 1,
            "redirections": [">"],
            "operators": [";"],
        }
        observation, _, _, _, info = env.step("<bash>sleep 30</bash>")
        assert "timed out" in observation
        _, _, _, _, info = env.step("nothing")
        assert info["metrics"] == {"commands": 2, "failing_commands": 2, "timeouts": 1, "invalid_actions": 1}
        assert not info["action_valid"]
    finally:
        uid = env._workspace.uid
        env.close()
    assert processes_of(uid) == []


def test_parse_action_takes_the_last_tag():
    assert parse_action("think <bash>ls</bash> then <submit>a\nb</submit>") == ("submit", "a\nb")
    assert parse_action("<action>ls</action>") is None


def test_describe_shows_the_dataset_statistics():
    env = agentenvs.make("shellops")
    try:
        dataset = env.describe()["dataset"]
    finally:
        env.close()
    assert dataset["demo"]["kinds"] == {"chained": 1, "edit": 2, "extract": 3}
    assert dataset["demo"]["reference_steps"]["max"] == 4
    assert set(dataset["test"]["kinds"]) >= {"extract-where", "edit-bug", "chained-rename"}

"""TextWorld games on the real engine: the expert wins, the score is intermediate, bad input is refused."""

from __future__ import annotations

import pytest

import agentenvs
from agentenvs.envs.textworld.games import game_folder, materialise, settings
from agentenvs.errors import InvalidArgument, PanelIntegrityError
from agentenvs.panels import load_panel
from agentenvs.tasks.textworld import build

DEMO = load_panel("textworld", "demo")


def play_expert(env, task_id: str) -> tuple[list[float], list[dict]]:
    _, info = env.reset(seed=0, options={"split": "demo", "task_id": task_id})
    rewards, infos, done = [], [info], False
    while not done:
        plan = info["privileged"]["expert_plan"]
        _, reward, terminated, truncated, info = env.step(plan[0])
        rewards.append(reward)
        infos.append(info)
        done = terminated or truncated
    return rewards, infos


@pytest.mark.slow
@pytest.mark.parametrize("task", DEMO, ids=lambda t: t["task_id"])
def test_the_replanning_expert_wins_every_demo_game_with_the_full_score(task):
    env = agentenvs.make("textworld", privileged=True)
    try:
        rewards, infos = play_expert(env, task["task_id"])
    finally:
        env.close()
    last = infos[-1]
    assert last["success"] is True and last["end_reason"] == "success" and last["score"] == 1.0
    assert sum(rewards) == pytest.approx(1.0)
    assert last["raw_score"] == task["max_score"]
    assert all(i["action_valid"] for i in infos[1:]), "the expert's commands are admissible"
    assert len(rewards) <= len(task["walkthrough"]) + 2
    scores = [i["score"] for i in infos]
    assert scores == sorted(scores), "the game's score never drops on the expert's way"
    if task["max_score"] > 1:
        assert any(0 < s < 1 for s in scores), "points arrive along the way, not only at the end"


def test_the_privileged_walkthrough_is_the_panel_rows_and_replays_to_a_win():
    env = agentenvs.make("textworld", privileged=True)
    task = DEMO[-1]
    try:
        _, info = env.reset(seed=0, options={"split": "demo", "task_id": task["task_id"]})
        walkthrough = info["privileged"]["walkthrough"]
        assert walkthrough == task["walkthrough"]
        for command in walkthrough:
            _, _, terminated, _, info = env.step(command)
        assert terminated and info["success"] is True and info["score"] == 1.0
    finally:
        env.close()


def test_control_characters_reach_the_engine_as_spaces_and_never_hang_it():
    env = agentenvs.make("textworld")
    try:
        env.reset(seed=0, options={"split": "demo", "task_id": DEMO[0]["task_id"]})
        looked, *_ = env.step("look")
        observation, _, _, _, info = env.step("\x00lo\tok\n")  # jericho waits forever on a NUL
        assert info["action_valid"] is False and observation != ""
        observation, _, _, _, info = env.step("\x00 look \x1b")
        room = observation.rsplit("=-", 1)[0]  # the status line after it counts moves
        assert info["action_valid"] is True and room == looked.rsplit("=-", 1)[0]
    finally:
        env.close()


def test_a_command_that_is_not_admissible_changes_nothing_and_says_so():
    env = agentenvs.make("textworld")
    try:
        _, info = env.reset(seed=3, options={"split": "demo", "task_id": DEMO[0]["task_id"]})
        _, reward, terminated, _, after = env.step("dance with the wardrobe")
        assert after["action_valid"] is False and reward == 0.0 and not terminated
        assert after["anchor"] == info["anchor"] and after["metrics"]["invalid_actions"] == 1
        assert after["admissible_actions"] == info["admissible_actions"]
    finally:
        env.close()


def test_the_same_task_and_seed_give_the_same_episode():
    transcripts = []
    for _ in range(2):
        env = agentenvs.make("textworld")
        observation, info = env.reset(seed=5, options={"split": "demo", "task_id": DEMO[1]["task_id"]})
        steps = [observation]
        for command in info["admissible_actions"][:3]:
            steps.append(env.step(command)[0])
        transcripts.append(steps)
        env.close()
    assert transcripts[0] == transcripts[1]


def test_unknown_family_or_level_names_the_choices():
    with pytest.raises(InvalidArgument, match="families are"):
        settings("zork", 1, "train")
    with pytest.raises(InvalidArgument, match="its levels are"):
        settings("cooking", 7, "train")


@pytest.mark.slow
def test_a_corrupt_cached_game_names_the_file_and_the_command_that_rebuilds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    task = DEMO[2]
    path = materialise(task)  # a fresh cache: the game is generated here and matches the panel's sha256
    assert path.parent == game_folder(task)
    assert path.parent.parent.name == "v1" and path.parent.name == f"{task['task_id']}-s{task['seed']}"
    path.write_bytes(path.read_bytes()[:4096])
    with pytest.raises(PanelIntegrityError) as caught:
        materialise(task)
    assert str(path.parent) in str(caught.value)
    assert f"agentenvs tasks build textworld --task {task['task_id']} --force" in str(caught.value)
    assert build.main(["--task", task["task_id"], "--force"]) == 0
    assert materialise(task) == path

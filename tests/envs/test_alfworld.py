"""ALFWorld on the real TextWorld/PDDL engine: the contract (in-process and over HTTP), the expert
on the valid panels, rewards, milestones, the privileged planner, fidelity to the official game
files, the official-data loader, the engine memos, and the cache staying out of $HOME."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentenvs
from agentenvs import panels
from agentenvs.envs.alfworld.env import ALFWorldEnv, materialise
from agentenvs.errors import InvalidArgument, PanelIntegrityError
from agentenvs.info import check_info
from agentenvs.testing import check_text_env

pytestmark = pytest.mark.slow

SHARED_DATA = Path(
    os.environ.get("AGENTENVS_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data"
)
OFFICIAL_DATA = Path(os.environ.get("AGENTENVS_ALFWORLD_OFFICIAL") or SHARED_DATA / "alfworld")
"""The official games: ``../shared/data/alfworld`` beside the checkout, or where the variables point."""
needs_official = pytest.mark.skipif(
    not (OFFICIAL_DATA / "json_2.1.1" / "valid_seen").is_dir(),
    reason=f"official ALFWorld data not found under {OFFICIAL_DATA} "
    "(set AGENTENVS_ALFWORLD_OFFICIAL to an alfworld-download folder)",
)
VALID_SPLITS = ("valid_seen", "valid_unseen")
INTRO = re.compile(
    r"-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room\. Looking quickly around you, "
    r"you see (a [a-z]+ \d+, )*(and )?a [a-z]+ \d+\.\n\nYour task is to: [a-z ]+\.\Z"
)


@pytest.fixture(scope="module")
def env() -> ALFWorldEnv:
    environment = agentenvs.make("alfworld")
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def expert_env() -> ALFWorldEnv:
    environment = agentenvs.make("alfworld", privileged=True)
    yield environment
    environment.close()


def first_of_each_type(split: str) -> list[dict]:
    seen: dict[str, dict] = {}
    for task in panels.load_panel("alfworld", split):
        seen.setdefault(task["task_type"], task)
    return list(seen.values())


def play(environment, task: dict, actions: list[str], split: str):
    observation, info = environment.reset(seed=0, options={"task_id": task["task_id"], "split": split})
    steps = []
    for action in actions:
        steps.append(environment.step(action))
    return observation, info, steps


# ---------------------------------------------------------------------- the contract


def test_conformance_suite_through_the_http_server():
    from agentenvs.servers.launch import launch_server

    with launch_server(["alfworld"], workers=2, extra_args=("--setup-timeout", "180")) as server:
        client = agentenvs.connect(server.url)
        try:
            check_text_env(functools.partial(client.make, "alfworld"), seeds=(0,), max_steps=8, fuzz_examples=10)
        finally:
            client.close()


# ---------------------------------------------------------------------- the expert


@pytest.mark.parametrize("split", ["train", *VALID_SPLITS])
def test_the_expert_walkthrough_solves_every_game_of_every_panel(env, split):
    failures = []
    for task in panels.load_panel("alfworld", split):
        _, _, steps = play(env, task, task["walkthrough"], split)
        _, reward, terminated, _, info = steps[-1]
        if not (terminated and reward == 1.0 and info["success"] and info["end_reason"] == "success"):
            failures.append(task["task_id"])
        assert all(step[4]["action_valid"] for step in steps), task["task_id"]
        assert not any(step[2] for step in steps[:-1]), f"{task['task_id']} ended before its walkthrough did"
    assert not failures, f"{len(failures)} games not solved by their walkthrough: {failures[:5]}"


def test_the_privileged_planner_replans_and_solves_one_game_of_each_type(expert_env):
    for task in first_of_each_type("valid_unseen"):
        _, info = expert_env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_unseen"})
        assert info["privileged"] == {"expert_plan": task["walkthrough"]} and check_info(info) == []
        expert_env.step("look")  # a detour: the planner must plan again from here
        for _ in range(len(task["walkthrough"]) + 1):
            _, reward, terminated, truncated, info = expert_env.step(info["privileged"]["expert_plan"][0])
            if terminated or truncated:
                break
        assert info["success"] and reward == 1.0, task["task_id"]


def test_privileged_info_is_absent_unless_asked_for(env):
    task = first_of_each_type("valid_seen")[0]
    _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
    assert "privileged" not in info


# ---------------------------------------------------------------------- rewards, validity, limits, milestones


def test_nothing_happens_is_an_invalid_action_and_changes_nothing(env):
    task = first_of_each_type("valid_seen")[0]
    _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
    after, reward, terminated, truncated, step_info = env.step("fly to the moon")
    assert after == "Nothing happens."
    assert step_info["action_valid"] is False and reward == 0.0 and not terminated and not truncated
    assert step_info["state_hash"] == info["state_hash"]
    assert step_info["metrics"]["invalid_actions"] == 1.0
    assert check_info(step_info) == []


def test_reward_scale_gives_verl_agents_ten():
    environment = agentenvs.make("alfworld", reward_scale=10)
    try:
        task = first_of_each_type("valid_seen")[0]
        _, _, steps = play(environment, task, task["walkthrough"], "valid_seen")
        assert steps[-1][1] == 10.0 and steps[-1][4]["score"] == 1.0
        assert environment.describe()["reward_range"] == [0.0, 10.0]
    finally:
        environment.close()
    with pytest.raises(InvalidArgument, match="reward_scale"):
        agentenvs.make("alfworld", reward_scale=0)


def test_fifty_turns_then_truncated(env):
    task = first_of_each_type("valid_seen")[0]
    env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
    for turn in range(1, 51):
        _, _, terminated, truncated, info = env.step("look")
        assert not terminated and truncated == (turn == 50)
    assert info["end_reason"] == "max_turns" and info["success"] is False


def test_milestones_follow_the_expert_in_order(env):
    expected = {
        "pick_and_place_simple": ["seen_target", "holding_target", "placed_target"],
        "look_at_obj_in_light": ["seen_target", "holding_target", "lamp_on"],
        "pick_clean_then_place_in_recep": ["seen_target", "holding_target", "cleaned_target", "placed_target"],
        "pick_heat_then_place_in_recep": ["seen_target", "holding_target", "heated_target", "placed_target"],
        "pick_cool_then_place_in_recep": ["seen_target", "holding_target", "cooled_target", "placed_target"],
        "pick_two_obj_and_place": ["seen_target", "holding_target", "placed_target", "placed_second_target"],
    }
    for task in first_of_each_type("valid_seen"):
        _, info, steps = play(env, task, task["walkthrough"], "valid_seen")
        assert info["milestones"] == []
        assert steps[-1][4]["milestones"] == expected[task["task_type"]], task["task_id"]
        counts = [len(step[4]["milestones"]) for step in steps]
        assert counts == sorted(counts), "milestones are cumulative"


def test_anchor_is_the_state_whatever_the_path(env):
    task = first_of_each_type("valid_seen")[0]
    options = {"task_id": task["task_id"], "split": "valid_seen"}
    _, start = env.reset(seed=0, options=options)
    assert env.step("inventory")[4]["anchor"] == env.step("look")[4]["anchor"] == start["anchor"]
    walks = [command for command in start["admissible_actions"] if command.startswith("go to ")]
    ends = []
    for path in ([walks[0], walks[2]], [walks[1], walks[2]]):
        env.reset(seed=0, options=options)
        ends.append([env.step(command)[4] for command in path])
    assert ends[0][-1]["anchor"] == ends[1][-1]["anchor"] != start["anchor"]
    assert ends[0][-1]["state_hash"] != ends[1][-1]["state_hash"], "state_hash keeps the engine's history facts"
    assert ends[0][0]["anchor"] != ends[1][0]["anchor"], "two receptacles, two states"


def test_extract_action_drops_a_trailing_period_around_an_admissible_command(env):
    task = first_of_each_type("valid_seen")[0]
    _, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
    command = info["admissible_actions"][0]
    response = f"I should look around first.\n<action>{command}.</action>"
    found = env.extract_action(response)
    assert found.action == command and response[found.start : found.end] == command
    assert env.extract_action("think\nlook").action == "look"


def test_describe_names_source_grammar_and_limits(env):
    description = env.describe()
    assert description["source"] == "generated" and description["max_turns"] == 50
    assert set(description["splits"]) == {"train", "valid_seen", "valid_unseen"}
    assert "put {object} in/on {receptacle}" in description["instructions"]
    assert description["capabilities"]["admissible_actions"] and description["capabilities"]["privileged"]


# ---------------------------------------------------------------------- fidelity and the cache


def test_first_observation_has_the_official_form_and_a_templated_goal(env):
    from alfworld.gen.goal_library import gdict

    for split in VALID_SPLITS:
        for task in first_of_each_type(split):
            observation, info = env.reset(seed=0, options={"task_id": task["task_id"], "split": split})
            assert INTRO.match(observation), observation
            goal = observation.rsplit("Your task is to: ", 1)[1]
            assert goal == task["goal"]
            p = {k: v.lower() for k, v in task["params"].items() if isinstance(v, str)}
            templates = gdict[task["task_type"]]["templates"]
            texts = {
                t.format(obj=p["object_target"], recep=p["parent_target"], toggle=p["toggle_target"]) + "."
                for t in templates
            }
            assert goal in texts
            assert {"look", "inventory"} <= set(info["admissible_actions"])
            assert all(a.startswith(("go to ", "examine ", "look", "inventory")) for a in info["admissible_actions"])


def test_a_tampered_row_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    task = dict(first_of_each_type("valid_seen")[0])
    task["objects"] = task["objects"][:-1]
    with pytest.raises(PanelIntegrityError, match="regenerate the panels"):
        materialise(task)


def test_caches_and_scratch_stay_out_of_home(tmp_path):
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    script = textwrap.dedent(
        """
        from agentenvs.tasks.alfworld.sampler import split_rules
        split_rules()  # the generator's first touch of the alfworld package
        import agentenvs
        env = agentenvs.make("alfworld", privileged=True)
        observation, info = env.reset(seed=3, options={"split": "valid_unseen"})
        env.step(info["privileged"]["expert_plan"][0])
        env.close()
        """
    )
    environment = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(cache)}
    environment.pop("ALFWORLD_DATA", None)
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, timeout=300)
    assert list(home.iterdir()) == [], "nothing may be written into $HOME"
    assert (cache / "agentenvs" / "alfworld" / "games").is_dir()


def test_importing_and_starting_the_engine_leave_the_environment_as_it_was(tmp_path):
    script = textwrap.dedent(
        """
        import os
        import agentenvs.envs.alfworld.env, agentenvs.tasks.alfworld.sampler
        assert "ALFWORLD_DATA" not in os.environ, "an import set ALFWORLD_DATA"
        from agentenvs.envs.alfworld.engine import AlfredEngine
        AlfredEngine().close()
        assert "ALFWORLD_DATA" not in os.environ, "starting the engine left ALFWORLD_DATA set"
        """
    )
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    environment.pop("ALFWORLD_DATA", None)
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, timeout=300)
    assert (tmp_path / "agentenvs" / "alfworld" / "alfworld_data").is_dir(), "the wheel's folder is in the cache"


def test_engine_memos_do_not_change_a_transcript():
    """The translator and parser memos are pure: a game plays the same with and without them."""
    script = textwrap.dedent(
        """
        import json, sys
        from agentenvs import panels
        from agentenvs.envs.alfworld import engine
        from agentenvs.envs.alfworld.env import materialise
        memos = sys.argv[1] == "on"
        task = [t for t in panels.load_panel("alfworld", "valid_seen") if t["task_type"] == "pick_two_obj_and_place"][0]
        game = engine.AlfredEngine(expert=True)
        engine.install_engine_memos(memos)
        game.load(str(materialise(task)))
        out = []
        for _ in range(2):
            state = game.reset()
            out.append([state["feedback"], state["admissible_commands"], state["extra.expert_plan"]])
            for command in ["look", *task["walkthrough"]]:
                state, score, done = game.step(command)
                out.append([state["feedback"], state["admissible_commands"], state["extra.expert_plan"], score])
        print(json.dumps(out))
        """
    )
    runs = [
        subprocess.run([sys.executable, "-c", script, flag], capture_output=True, text=True, check=True, timeout=600)
        for flag in ("on", "off")
    ]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.strip()


# ---------------------------------------------------------------------- official data


@needs_official
def test_official_loader_lists_the_official_splits_with_trial_ids():
    environment = ALFWorldEnv(data_dir=OFFICIAL_DATA)
    try:
        assert environment.splits() == {"valid_seen": 140, "valid_unseen": 134}
        task = environment.tasks("valid_unseen")[0]
        task_dir, trial = task["task_id"].split("/")
        assert trial.startswith("trial_") and task_dir.startswith(task["task_type"])
        traj = json.loads((Path(task["game_path"]).parent / "traj_data.json").read_text())
        assert traj["task_type"] == task["task_type"]
        assert environment.describe()["source"] == "official"
    finally:
        environment.close()


@needs_official
def test_official_game_plays_to_success_with_the_planner():
    """The smallest official valid_seen game, solved by the privileged planner expert."""
    environment = ALFWorldEnv(data_dir=OFFICIAL_DATA, privileged=True)
    try:
        tasks = environment.tasks("valid_seen")
        task = min(tasks, key=lambda t: Path(t["game_path"]).stat().st_size)
        observation, info = environment.reset(seed=0, options={"task_id": task["task_id"], "split": "valid_seen"})
        assert INTRO.match(observation)
        for _ in range(30):
            _, reward, terminated, truncated, info = environment.step(info["privileged"]["expert_plan"][0])
            if terminated or truncated:
                break
        assert info["success"] and reward == 1.0
    finally:
        environment.close()


@needs_official
def test_every_admissible_command_fits_a_template_of_the_official_games(env):
    """The command templates come from an official game file's grammar; every command our games
    admit along the expert's path must fit one of them."""
    official = next((OFFICIAL_DATA / "json_2.1.1" / "valid_seen").glob("*/*/game.tw-pddl"))
    templates = re.findall(r'template :: "([^"]+)";', json.loads(official.read_text())["grammar"])
    templates = [re.sub(r"\[\{(\w+)\.name[^\]]*\]", r"{\1}", t) for t in templates]  # go to [{r.name | ...}]
    patterns = [re.compile("^" + re.sub(r"\\\{[a-z]+\\\}", "[a-z]+ \\\\d+", re.escape(t)) + "$") for t in templates]
    for task in first_of_each_type("valid_seen"):
        _, info, steps = play(env, task, task["walkthrough"], "valid_seen")
        for command in info["admissible_actions"] + [a for s in steps for a in s[4]["admissible_actions"]]:
            assert any(p.match(command) for p in patterns), command
    with pytest.raises(InvalidArgument, match="alfworld-download"):
        ALFWorldEnv(data_dir=OFFICIAL_DATA / "nowhere")

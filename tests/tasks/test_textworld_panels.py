"""The frozen TextWorld panels: every family and level in every split, held-out games kept out of train,
and a game regenerated in a fresh process with the sha256 the panel records."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentenvs.envs.textworld.games import FAMILIES, game_digest, generate
from agentenvs.panels import load_panel, splits
from agentenvs.tasks.textworld.generate import SIZES, plan

PANELS = {split: load_panel("textworld", split) for split in splits("textworld")}


def test_every_family_and_level_has_its_games_in_every_split():
    for split, count in SIZES.items():
        cells = {(t["family"], t["level"]) for t in PANELS[split]}
        assert cells == {(f, level) for f, spec in FAMILIES.items() for level in spec["levels"]}
        assert len(PANELS[split]) == count * len(cells)
    assert {t["family"] for t in PANELS["demo"]} == set(FAMILIES)


def test_the_panels_are_the_plan_the_generator_draws():
    for split, rows in plan().items():
        assert [(t["task_id"], t["seed"], t["kind"]) for t in PANELS[split]] == [
            (r["task_id"], r["seed"], r["kind"]) for r in rows
        ]


def test_held_out_games_do_not_occur_in_train():
    train = PANELS["train"]
    for split in ("valid", "test", "demo"):
        held = PANELS[split]
        assert not {t["game_sha256"] for t in held} & {t["game_sha256"] for t in train}
        assert not {(t["family"], t["level"], t["seed"]) for t in held} & {
            (t["family"], t["level"], t["seed"]) for t in train
        }
        assert all(t["kind"] != "train" for t in held)
    recipes = {tuple(map(tuple, t["recipe"])) for t in train if t["family"] == "cooking"}
    dishes = {dish for recipe in recipes for dish in recipe}
    for split in ("valid", "test"):
        for task in (t for t in PANELS[split] if t["family"] == "cooking"):
            assert not {tuple(d) for d in task["recipe"]} & dishes, f"{task['task_id']} cooks a train dish"


def test_walkthroughs_fit_the_turn_limits():
    for rows in PANELS.values():
        for task in rows:
            assert 0 < len(task["walkthrough"]) < task["max_turns"], task["task_id"]


@pytest.mark.slow
def test_a_game_regenerated_in_a_fresh_process_matches_its_recorded_sha256(tmp_path):
    task = PANELS["test"][-1]  # cooking level 3: the largest generator path
    summary = generate(task["family"], task["level"], task["kind"], task["seed"], tmp_path)
    assert game_digest(tmp_path) == task["game_sha256"]
    assert summary["walkthrough"] == task["walkthrough"] and summary["walkthrough_wins"]


def test_generation_refuses_to_run_without_the_fixed_hash_seed(tmp_path):
    command = [sys.executable, "-m", "agentenvs.envs.textworld.games", "coin", "1", "train", "1", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, env={"PYTHONHASHSEED": "1", "PATH": ""}, timeout=120)
    assert done.returncode != 0 and "PYTHONHASHSEED=0" in done.stderr

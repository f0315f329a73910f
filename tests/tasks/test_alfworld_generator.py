"""The ALFWorld generator and its frozen panels: sizes and task types, what makes unseen unseen,
rows that rebuild to their recorded game hash, byte-identical regeneration, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from agentenvs import panels
from agentenvs.envs.alfworld.problem import TASK_TYPES, build_game, game_logic, game_sha256
from agentenvs.tasks.alfworld import generate
from agentenvs.tasks.alfworld.sampler import HELD_OUT_CLASSES, split_rules

SPLITS = ("train", "valid_seen", "valid_unseen")


def canonical(task: dict) -> str:
    return json.dumps(task, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def test_panel_sizes_and_every_task_type_in_every_split():
    sizes = panels.splits("alfworld")
    assert sizes["train"] >= 600 and sizes["valid_seen"] == 140 and sizes["valid_unseen"] == 134
    for split in SPLITS:
        tasks = panels.load_panel("alfworld", split)  # verified against the manifest's sha256
        counts = Counter(t["task_type"] for t in tasks)
        assert set(counts) == set(TASK_TYPES)
        assert dict(counts) == generate.SPLIT_SIZES[split]
        assert len({t["task_id"] for t in tasks}) == len(tasks)


def test_unseen_has_held_out_floor_plans_and_object_classes():
    rules = split_rules()
    assert not set(rules["valid_unseen"].floor_plans) & set(rules["train"].floor_plans)
    for split in ("train", "valid_seen"):
        for task in panels.load_panel("alfworld", split):
            assert task["floor_plan"] in rules[split].floor_plans
            assert not {cls for cls, _ in task["objects"]} & HELD_OUT_CLASSES, task["task_id"]
    for task in panels.load_panel("alfworld", "valid_unseen"):
        assert task["floor_plan"] in rules["valid_unseen"].floor_plans
        assert task["params"]["object_target"] in HELD_OUT_CLASSES


def test_goal_texts_vary_over_alfworlds_templates():
    from alfworld.gen.goal_library import gdict

    for split in SPLITS:
        tasks = panels.load_panel("alfworld", split)
        for task_type in TASK_TYPES:
            used = set()
            for task in (t for t in tasks if t["task_type"] == task_type):
                prefixes = [template.split("{")[0] for template in gdict[task_type]["templates"]]
                matches = [i for i, prefix in enumerate(prefixes) if task["goal"].startswith(prefix)]
                assert matches, task["goal"]
                used.update(matches)
            assert used == {0, 1} or split != "train", f"{split}/{task_type} uses only templates {used}"


def test_every_row_rebuilds_to_its_recorded_game_hash_and_has_a_walkthrough():
    for split in SPLITS:
        for task in panels.load_panel("alfworld", split):
            assert game_sha256(build_game(task)) == task["game_sha256"], task["task_id"]
            assert 3 <= len(task["walkthrough"]) <= 50


def test_game_logic_is_the_official_game_files_logic():
    """The wheel's domain and grammar, converted, equal those inside the official game files."""
    import os
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    shared = Path(os.environ.get("AGENTENVS_SHARED_DATA") or repo.parent / "shared" / "data")
    official = shared / "alfworld" / "json_2.1.1" / "valid_seen"
    games = sorted(official.glob("*/*/game.tw-pddl"))[:3] if official.is_dir() else []
    if not games:
        pytest.skip(f"official ALFWorld game files not found under {official}")
    domain, grammar = game_logic()
    for path in games:
        game = json.loads(path.read_text())
        assert game["pddl_domain"] == domain
        assert re.sub(r'"Your task is to: [^"]*"', '"Your task is to: UNKNOWN GOAL."', game["grammar"]) == grammar


def test_regenerating_committed_rows_is_byte_identical():
    """A deterministic sample (the first game of each type in each split) drawn and solved again."""
    generate._worker_init()
    for split in SPLITS:
        tasks = panels.load_panel("alfworld", split)
        for task_type in TASK_TYPES:
            index = next(i for i, t in enumerate(tasks) if t["task_type"] == task_type)
            assert canonical(generate.make_task((split, task_type, 0))) == canonical(tasks[index])


def test_same_seed_same_bytes_whatever_the_number_of_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(generate, "SPLIT_SIZES", {"valid_unseen": dict.fromkeys(TASK_TYPES, 1)})
    outputs = []
    for processes in (1, 2):
        root = tmp_path / f"p{processes}"
        generate.generate(["valid_unseen"], root=root, seed=7, processes=processes, progress=False)
        outputs.append(((root / "alfworld" / "panels" / "valid_unseen.jsonl").read_bytes(),
                        json.loads((root / "alfworld" / "manifest.json").read_text())))  # fmt: skip
    assert outputs[0] == outputs[1]
    assert outputs[0][1]["seed"] == 7 and outputs[0][1]["splits"]["valid_unseen"]["count"] == 6
    committed = [t for t in panels.load_panel("alfworld", "valid_unseen") if t["task_id"].endswith("00000")]
    assert outputs[0][0].decode().splitlines() != [canonical(t) for t in committed], "another seed, other games"


def test_cli_help_explains_itself():
    answer = subprocess.run([sys.executable, "-m", "agentenvs.tasks.alfworld.generate", "--help"],
                            capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    text = " ".join(answer.stdout.replace("-\n", "-").split())  # argparse wraps lines (also after hyphens)
    assert "fast-downward" in text and "--splits" in text and "byte-identical" in text

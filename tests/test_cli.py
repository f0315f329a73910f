"""``agentenvs list``, ``describe`` and ``play``: in-process through ``cli.main`` and as a real subprocess."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from agentenvs import cli
from agentenvs.cli_envs import engine_status
from agentenvs.registry import EnvSpec


def agentenvs_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_list_shows_every_builtin_env_with_its_gym_id(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["NAME", "GYM"]
    bandit = next(line for line in out.splitlines() if line.startswith("bandit "))
    assert "agentenvs/Bandit-v0" in bandit and " ready " in bandit


def test_list_json_reports_whether_the_engine_is_installed(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["bandit"]["installed"] is True and rows["bandit"]["gym_id"] == "agentenvs/Bandit-v0"
    assert {"alfworld", "sciworld"} <= set(rows)


def test_engine_status_names_the_missing_piece_and_the_fix():
    absent = EnvSpec(name="ghost", entry_point="agentenvs.envs.ghost.env:GhostEnv", gym_id="agentenvs/Ghost-v0")
    assert engine_status(absent) == (False, "agentenvs.envs.ghost is not part of this installation")
    needs = EnvSpec(name="b", entry_point="agentenvs.envs.bandit.env:BanditEnv", gym_id="x/B-v0", extra="nonexistent")
    assert engine_status(needs) == (True, "ready")  # an extra with no requirements needs nothing


def test_engine_status_of_a_top_level_module_entry_point():
    """A test's own ``module:Class`` entry point (no dotted package) must not crash ``list``."""
    top_level = EnvSpec(name="solo", entry_point="json:JSONDecoder", gym_id="x/Solo-v0")
    assert engine_status(top_level) == (True, "ready")
    absent = EnvSpec(name="gone", entry_point="no_such_module_anywhere:Env", gym_id="x/Gone-v0")
    assert engine_status(absent) == (False, "no_such_module_anywhere is not part of this installation")


def test_describe_prints_splits_limits_format_and_instructions(capsys):
    assert cli.main(["describe", "bandit"]) == 0
    out = capsys.readouterr().out
    for expected in ("test (60 tasks)", "train (300 tasks)", "max_turns:", "reward range:  [-1.0, 2.0]", "pull[i]"):
        assert expected in out
    assert "multi-armed bandit" in out and "admissible_actions: yes" in out


def test_describe_json_is_the_full_description(capsys):
    assert cli.main(["describe", "bandit", "--json"]) == 0
    description = json.loads(capsys.readouterr().out)
    assert description["splits"] == {"test": 60, "train": 300}
    assert description["capabilities"]["privileged"] is True and description["gym_id"] == "agentenvs/Bandit-v0"


def test_unknown_env_is_a_clear_error(capsys):
    assert cli.main(["describe", "nope"]) == 2
    assert "no environment named 'nope'" in capsys.readouterr().err


def test_play_driven_by_stdin_until_quit(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("pull[1]\nblah\nquit\npull[0]\n"))
    assert cli.main(["play", "bandit", "--task-id", "bernoulli-k2-test-000", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "[admissible actions] pull[0], pull[1]" in out
    assert out.count("[reward]") == 2 and "(the action was not carried out)" in out
    assert "[quit] after 2 turns" in out


def test_play_to_the_end_in_a_subprocess_shows_the_outcome():
    result = agentenvs_cli("play", "bandit", "--task-id", "bernoulli-k2-test-000", stdin="pull[1]\n" * 40)
    assert result.returncode == 0, result.stderr
    assert "Pulls left: 0 of 40" in result.stdout
    assert "[episode over] end: success, success: yes" in result.stdout
    assert "[metric] expected_regret: 0" in result.stdout and "[score] 1.000" in result.stdout


def test_play_stops_at_end_of_input_and_is_deterministic():
    first = agentenvs_cli("play", "bandit", "--split", "train", "--seed", "7", stdin="pull[0]\npull[1]\n")
    assert first.returncode == 0 and "[quit] after 2 turns" in first.stdout
    assert agentenvs_cli("play", "bandit", "--split", "train", "--seed", "7", stdin="pull[0]\npull[1]\n").stdout == (
        first.stdout
    )


@pytest.mark.parametrize("args", [["--task-id", "nope"], ["--split", "dev"]])
def test_play_with_a_bad_task_or_split_says_what_exists(args):
    result = agentenvs_cli("play", "bandit", *args)
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert "bernoulli-k2-test-000" in result.stderr or "['test', 'train']" in result.stderr


def test_help_lists_the_commands():
    result = agentenvs_cli("play", "--help")
    assert result.returncode == 0 and "--task-id" in result.stdout and "quit" in result.stdout

"""The eval runner end to end on the real bandit: results, resumption after a kill, refusals, re-scoring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.runner import EvalConfig, evaluate, rescore_to_results
from agentenvs.evaluation.scoring import iter_records

EVAL = [
    sys.executable,
    "-m",
    "agentenvs.cli",
    "eval",
    "--env",
    "bandit",
    "--policy",
    "random",
    "--k",
    "4",
    "--limit",
    "30",
    "--concurrency",
    "1",
    "--no-progress",
]
EPISODES = 30 * 4


def eval_command(out: Path) -> list[str]:
    return [*EVAL, "--out", str(out)]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True) if path.is_file() else []


def comparable(record: dict) -> tuple:
    """What must be identical between two runs of the same episode (timings and dates may differ)."""
    return (record["episode_id"], record["success"], record["score"], [s["action"] for s in record["steps"]])


@pytest.mark.slow
def test_a_killed_run_resumes_without_losing_or_repeating_an_episode(tmp_path):
    out = tmp_path / "killed"
    episodes = out / "episodes.jsonl"
    process = subprocess.Popen(eval_command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(lines(episodes)) < 10 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.poll() is None, "the run ended before it could be killed: " + process.stderr.read().decode()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    before = [json.loads(line) for line in lines(episodes) if line.endswith("\n")]
    assert 10 <= len(before) < EPISODES
    assert not (out / "results.json").exists()

    resumed = subprocess.run(eval_command(out), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} of {EPISODES} episodes already finished" in resumed.stdout
    after = list(iter_records(episodes))
    ids = [r["episode_id"] for r in after]
    assert len(ids) == len(set(ids)) == EPISODES, "an episode was lost or run twice"
    assert [comparable(r) for r in after[: len(before)]] == [comparable(r) for r in before], "a finished one changed"

    fresh = tmp_path / "fresh"
    assert subprocess.run(eval_command(fresh), capture_output=True, timeout=300).returncode == 0
    by_id = {r["episode_id"]: comparable(r) for r in iter_records(fresh / "episodes.jsonl")}
    assert sorted(by_id.values()) == sorted(comparable(r) for r in after), "resumed episodes differ from a fresh run"
    resumed_metrics = json.loads((out / "results.json").read_text())["metrics"]
    assert resumed_metrics == json.loads((fresh / "results.json").read_text())["metrics"]


def test_results_describe_the_run_and_rescoring_reproduces_them(tmp_path):
    config = EvalConfig(env="bandit", policy="expert", k=2, limit=4, concurrency=2)
    path = evaluate(config, tmp_path / "run", progress=False)
    result = json.loads(path.read_text())
    assert result["schema"] == "agentenvs.results/1"
    assert result["run_id"] == "bandit-test-expert-k2-n4"
    assert result["env"]["name"] == "bandit" and result["env"]["split"] == "test"
    assert len(result["env"]["panel_hash"]) == 64
    assert result["protocol"]["k"] == 2 and len(result["protocol"]["task_ids"]) == 4
    assert result["counts"] == {**result["counts"], "tasks": 4, "episodes": 8}
    assert result["hardware"]["cpus"] == os.cpu_count()
    assert result["metrics"]["success_rate"]["value"] == 1.0  # the oracle arm every pull
    assert "expected_regret" in result["metrics"]["env_metrics"]
    assert len(result["by_task_type"]) == 4  # round-robin over the panel's task types

    [again] = rescore_to_results([tmp_path / "run" / "episodes.jsonl"], tmp_path / "rescored")
    assert json.loads(again.read_text())["metrics"]["pass_at_k"] == result["metrics"]["pass_at_k"]

    evaluate(config, tmp_path / "run", progress=False)  # everything finished: nothing runs, same numbers
    assert json.loads(path.read_text())["metrics"] == result["metrics"]
    with pytest.raises(InvalidArgument, match="holds another run"):
        evaluate(EvalConfig(env="bandit", policy="random", k=2, limit=4), tmp_path / "run", progress=False)


def test_cli_errors_name_the_fix(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "agentenvs.cli", *args], capture_output=True, text=True, timeout=120
        )

    missing = run("eval", "--env", "bandit")
    assert missing.returncode == 2 and "--out" in missing.stderr
    bad_split = run("eval", "--env", "bandit", "--split", "nope", "--policy", "random", "--out", str(tmp_path / "x"))
    assert bad_split.returncode == 2 and "its splits are" in bad_split.stderr
    bad_k = run("eval", "--env", "bandit", "--k", "0", "--out", str(tmp_path / "y"))
    assert bad_k.returncode == 2 and "--k must be at least 1" in bad_k.stderr
    assert "resume" in run("eval", "--help").stdout


@pytest.mark.slow
def test_evaluating_through_a_real_server_gives_the_in_process_episodes(tmp_path):
    from agentenvs.servers.launch import launch_server

    local = EvalConfig(env="bandit", policy="random", k=2, limit=3, concurrency=2)
    evaluate(local, tmp_path / "local", progress=False)
    with launch_server(["bandit"], workers=1) as server:
        remote = EvalConfig(env="bandit", policy="random", k=2, limit=3, concurrency=2, servers=(server.url,))
        path = evaluate(remote, tmp_path / "remote", progress=False)
        expert = EvalConfig(env="bandit", policy="expert", k=1, limit=2, servers=(server.url,))
        expert_result = json.loads(evaluate(expert, tmp_path / "expert", progress=False).read_text())
    assert json.loads(path.read_text())["protocol"]["servers"] == 1
    by_id = {r["episode_id"]: comparable(r) for r in iter_records(tmp_path / "local" / "episodes.jsonl")}
    assert sorted(by_id.values()) == sorted(comparable(r) for r in iter_records(tmp_path / "remote" / "episodes.jsonl"))
    assert expert_result["metrics"]["success_rate"]["value"] == 1.0  # privileged sessions work over HTTP

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
from agentenvs.evaluation.runner import EvalConfig, RunMismatch, evaluate, rescore_to_results, select_tasks
from agentenvs.rollout.store import EpisodeStore

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
    after = EpisodeStore(episodes).rows()
    ids = [r["episode_id"] for r in after]
    assert len(ids) == len(set(ids)) == EPISODES, "an episode was lost or run twice"
    assert [comparable(r) for r in after[: len(before)]] == [comparable(r) for r in before], "a finished one changed"

    fresh = tmp_path / "fresh"
    assert subprocess.run(eval_command(fresh), capture_output=True, timeout=300).returncode == 0
    by_id = {r["episode_id"]: comparable(r) for r in EpisodeStore(fresh / "episodes.jsonl").rows()}
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
    by_id = {r["episode_id"]: comparable(r) for r in EpisodeStore(tmp_path / "local" / "episodes.jsonl").rows()}
    assert sorted(by_id.values()) == sorted(
        comparable(r) for r in EpisodeStore(tmp_path / "remote" / "episodes.jsonl").rows()
    )
    assert expert_result["metrics"]["success_rate"]["value"] == 1.0  # privileged sessions work over HTTP


def test_a_run_of_another_identity_is_never_resumed_into(tmp_path, monkeypatch):
    """An upgraded environment (or panel, or model) makes another run: an error, or with
    ``fresh_on_mismatch`` (the demo) a fresh start, never old episodes in new scores."""
    from agentenvs.envs.bandit.env import BanditEnv

    config = EvalConfig(env="bandit", policy="random", k=1, limit=2)
    evaluate(config, tmp_path, progress=False)
    identity = json.loads((tmp_path / "run.json").read_text())["identity"]
    assert identity["env_version"] == str(BanditEnv.version)
    assert len(identity["panel_hash"]) == 64 and identity["model"] == {"name": "random", "seed": 0}
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text(episodes.read_text().replace('"env_version":', '"old":1,"env_version":'))
    monkeypatch.setattr(BanditEnv, "version", f"{BanditEnv.version}-upgraded")
    with pytest.raises(RunMismatch, match="differs in env_version"):
        evaluate(config, tmp_path, progress=False)
    result = json.loads(evaluate(config, tmp_path, progress=False, fresh_on_mismatch=True).read_text())
    assert result["counts"]["episodes"] == 2
    rows = EpisodeStore(episodes).rows()
    assert len(rows) == 2 and not any("old" in row for row in rows), "an old episode was kept"
    assert json.loads((tmp_path / "run.json").read_text())["identity"]["env_version"].endswith("-upgraded")


def test_limit_takes_tasks_round_robin_over_types_in_panel_order():
    tasks = [{"task_id": f"{kind}{i}", "task_type": kind} for kind in ("x", "y", "z") for i in range(3)]
    assert [t["task_id"] for t in select_tasks(tasks, 4)] == ["x0", "x1", "y0", "z0"]
    assert [t["task_id"] for t in select_tasks(tasks, 3)] == ["x0", "y0", "z0"]
    assert select_tasks(tasks, None) == tasks
    assert select_tasks(tasks, 100) == tasks
    untyped = [{"task_id": f"t{i}"} for i in range(5)]
    assert [t["task_id"] for t in select_tasks(untyped, 2)] == ["t0", "t1"]

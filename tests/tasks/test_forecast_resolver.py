"""``agentenvs forecast advance|resolve|void|status``: backfilling stored predictions (tasks/forecast/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentenvs
from agentenvs import cli
from agentenvs.predictions import PredictionStore


def _predict(store: Path, split: str, count: int, answer: str = "0.6") -> list[tuple[str, dict]]:
    """Run ``count`` binary pending episodes into ``store``; (resolution_id, task) of each."""
    env = agentenvs.make("forecast", store=store)
    out = []
    for task in [t for t in env.tasks(split) if t["kind"] == "binary"][:count]:
        env.reset(seed=0, options={"task_id": task["task_id"], "split": split})
        info = env.step(f"<answer>{answer}</answer>")[4]
        out.append((info["resolution_id"], task))
    return out


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["forecast", *args])
    return code, capsys.readouterr().out


def test_advance_resolves_what_came_due_with_the_worlds_outcome(tmp_path: Path, capsys) -> None:
    store = tmp_path / "p.sqlite"
    made = _predict(store, "dev", 5)
    lead = min(t["resolution_tick"] - t["open_tick"] for _, t in made)
    code, out = _cli(capsys, "advance", "--store", str(store), "--ticks", str(lead - 1))
    assert code == 0 and json.loads(out)["resolved"] == 0
    code, out = _cli(capsys, "advance", "--store", str(store), "--ticks", "1000")
    assert code == 0 and json.loads(out) == {"clock": lead + 999, "resolved": 5, "pending": 0}
    with PredictionStore(store) as s:
        for rid, task in made:
            pred = s.get(rid)
            assert pred.state == "resolved" and pred.outcome == task["outcome"]
            assert pred.scores["brier"] == pytest.approx((0.6 - task["outcome"]) ** 2)
    code, out = _cli(capsys, "status", "--store", str(store))
    status = json.loads(out)
    assert status["counts"]["resolved"] == 5 and status["calibration"]["n"] == 5


def test_resolve_and_void_by_id_and_their_errors(tmp_path: Path, capsys) -> None:
    store = tmp_path / "p.sqlite"
    (rid, _), (other, _) = _predict(store, "test", 2)
    assert _cli(capsys, "resolve", "--store", str(store), "--id", rid, "--outcome", "1") == (0, '{"resolved": 1}\n')
    code, out = _cli(capsys, "resolve", "--store", str(store), "--id", rid, "--outcome", "0")
    assert code == 2 and "already resolved" in out
    code, out = _cli(capsys, "resolve", "--store", str(store), "--id", "nope", "--outcome", "1")
    assert code == 2 and "no prediction" in out
    code, out = _cli(capsys, "resolve", "--store", str(store), "--id", other, "--outcome", "maybe")
    assert code == 2 and "resolve" in out
    assert _cli(capsys, "void", "--store", str(store), "--id", other, "--reason", "annulled")[0] == 0
    with PredictionStore(store) as s:
        assert s.counts() == {"pending": 0, "resolved": 1, "voided": 1}
        assert s.get(rid).outcome == 1

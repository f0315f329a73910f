"""The forecast environment: tools, answers per kind, pending vs resolved mode, the store, the conformance suite."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import agentenvs
from agentenvs import panels
from agentenvs.envs.forecast import SPEC
from agentenvs.evaluation.leaderboard import committed_dir
from agentenvs.predictions import PredictionStore
from agentenvs.tasks.forecast.resolver import advance
from agentenvs.testing import check_text_env


def _env_at(kind: str, **kwargs: object):
    env = agentenvs.make("forecast", privileged=True, **kwargs)
    task = next(t for t in env.tasks("test") if t["kind"] == kind)
    env.reset(seed=0, options={"task_id": task["task_id"]})
    return env, task


def test_pending_episode_stores_the_prediction(tmp_path: Path) -> None:
    store_path = tmp_path / "p.sqlite"
    env, task = _env_at("binary", store=store_path)
    _obs, reward, terminated, _, info = env.step("<answer>0.7</answer>")
    assert terminated and reward == 0.0 and info["reward_pending"] is True
    assert info["success"] is False  # a success is known only once the forecast resolves
    pred = PredictionStore(store_path).get(info["resolution_id"])
    assert pred.state == "pending" and pred.forecast == 0.7 and pred.question_id == task["task_id"]
    assert pred.payload["resolution_tick"] == task["resolution_tick"]


@pytest.mark.parametrize(
    ("kind", "answer"),
    [("binary", "0.3"), ("choice", "[0.2, 0.3, 0.5]"), ("numeric", "[80, 95, 110]")],
)
def test_resolved_mode_scores_at_once(kind: str, answer: str) -> None:
    env, _task = _env_at(kind, mode="resolved")
    _, reward, terminated, _, info = env.step(f"I think <answer>{answer}</answer>")
    assert terminated and "reward_pending" not in info and 0.0 <= reward <= 1.0
    assert info["score"] == reward and ("brier" in info["metrics"] or "crps" in info["metrics"])


@pytest.mark.parametrize("kind", ["binary", "choice", "numeric"])
def test_resolved_mode_and_the_resolver_agree_on_reward_and_success(tmp_path: Path, kind: str) -> None:
    """One scorer: a forecast scored at once (``resolved``, what the leaderboard runs) and the same forecast
    stored, then resolved by ``advance`` with the world's outcome, earn the same reward and success."""
    store_path = tmp_path / "p.sqlite"
    resolved, pending = _env_at(kind, mode="resolved")[0], _env_at(kind, store=store_path)[0]
    played = []
    for task in [t for t in resolved.tasks("test") if t["kind"] == kind][:6]:
        _, info = resolved.reset(seed=0, options={"task_id": task["task_id"]})
        for answer in [info["privileged"]["expert_action"], *info["privileged"]["baseline_actions"].values()]:
            resolved.reset(seed=0, options={"task_id": task["task_id"]})
            _, reward, _, _, scored = resolved.step(answer)
            pending.reset(seed=0, options={"task_id": task["task_id"]})
            played.append((pending.step(answer)[4]["resolution_id"], reward, scored["success"]))
    with PredictionStore(store_path) as store:
        advance(store, 1000)
        for rid, reward, success in played:
            scores = store.get(rid).scores
            assert scores["reward"] == reward and bool(scores["success"]) is success


def test_bad_answers_get_feedback_and_the_episode_goes_on() -> None:
    env, _ = _env_at("binary")
    for bad in ["<answer>1.4</answer>", "<answer>NaN</answer>", "<answer>yes</answer>", "look around"]:
        obs, reward, terminated, _, info = env.step(bad)
        assert not terminated and info["action_valid"] is False and reward == 0.0
    env, _ = _env_at("choice")
    obs, *_ = env.step('<answer>{"wheat index": 1.0}</answer>')
    assert "each option" in obs


def test_search_only_shows_news_published_by_the_open_tick() -> None:
    env, task = _env_at("binary")
    obs, *_ = env.step("search[tick]")
    ticks = [int(line.split("tick ")[1].split(":")[0]) for line in obs.splitlines()[1:]]
    assert ticks and max(ticks) <= task["open_tick"]
    item = obs.splitlines()[1].split("]")[0][1:]
    assert env.step(f"read[{item}]")[0].startswith("Tick")


def test_user_question_file(tmp_path: Path) -> None:
    rows = [
        {"question_id": "q1", "question": "Rain tomorrow?", "kind": "binary", "criteria": "Rain gauge > 1mm.",
         "close_date": "2027-01-01", "background": ["The forecast says rain is likely."], "outcome": 1},
        {"question_id": "q2", "question": "Who wins?", "kind": "choice", "options": ["A", "B"],
         "criteria": "Official result.", "close_date": "2027-02-01"},
        {"question_id": "q3", "question": "Rainfall in mm?", "kind": "numeric", "criteria": "Gauge total.",
         "close_date": "2027-01-01", "center": 5.0, "scale": 4.0, "quantiles": ["0.25", "0.5", "0.75"],
         "outcome": 6.0},
    ]  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = agentenvs.make("forecast", questions=path, mode="resolved")
    assert env.splits() == {"custom": 3}
    env.reset(seed=0, options={"split": "custom", "task_id": "q1"})
    assert "rain is likely" in env.step("search[rain]")[0] or "bg-0" in env.step("search[rain]")[0]
    _, reward, *_ = env.step("<answer>0.8</answer>")
    assert reward == pytest.approx(1 - 0.04)
    obs, _ = env.reset(seed=0, options={"split": "custom", "task_id": "q3"})
    assert "exactly the levels 0.25, 0.5, 0.75" in obs
    assert env.step("<answer>[3, 5, 7, 9]</answer>")[4]["action_valid"] is False
    _, reward, terminated, _, info = env.step('<answer>{"0.25": 4, "0.5": 5.5, "0.75": 7}</answer>')
    assert terminated and 0.9 < reward < 1.0 and info["success"] is True
    bad = tmp_path / "bad.jsonl"
    for row, match in [({"question_id": "x", "kind": "binary"}, "missing"), ({**rows[2], "center": None}, "center")]:
        bad.write_text(json.dumps(row) + "\n")
        with pytest.raises(agentenvs.errors.InvalidArgument, match=match):
            agentenvs.make("forecast", questions=bad)


@pytest.mark.slow
def test_conformance() -> None:
    report = check_text_env(functools.partial(agentenvs.make, "forecast"), max_steps=8, fuzz_examples=20)
    assert "cross_process" in report.passed


@pytest.mark.parametrize(
    ("row", "action"),
    [("expert", "expert_action"), ("baseline-base_rate", "base_rate"), ("baseline-half", "half"), ("smollm2", None)],
)
def test_the_committed_leaderboard_rows_are_todays_scores(row: str, action: str | None) -> None:
    """The committed forecast rows were run on this panel and environment version, and the reference rows
    hold the mean reward and success rate the scorer gives their answers now (rerun them when it changes:
    ``python -m agentenvs.evaluation.baselines --env forecast --out DIR --publish evaluation/leaderboard``)."""
    name = next(p.name for p in committed_dir().glob(f"forecast-test-{row}*.json"))
    result = json.loads((committed_dir() / name).read_text())
    assert result["env"]["version"] == SPEC.version and result["env"]["kwargs"] == {"mode": "resolved"}
    assert result["env"]["panel_hash"] == panels.panel_hash("forecast", "test")
    if action is None:
        return
    env, rewards, successes = agentenvs.make("forecast", privileged=True, mode="resolved"), [], []
    for task in env.tasks("test"):
        _, info = env.reset(seed=0, options={"task_id": task["task_id"]})
        answer = info["privileged"].get(action) or info["privileged"]["baseline_actions"][action]
        _, reward, _, _, end = env.step(answer)
        rewards.append(reward)
        successes.append(end["success"])
    assert result["metrics"]["mean_score"]["value"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-12)
    assert result["metrics"]["success_rate"]["value"] == pytest.approx(sum(successes) / len(successes), abs=1e-12)

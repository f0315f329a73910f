"""The scorer on hand-built episode records: every number worked out by hand, and re-scoring from disk."""

from __future__ import annotations

import json

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.scoring import group_runs, load_records, rescore, score_records


@pytest.fixture
def run(make_episode):
    """Task a: success at turn 2 and a failure; task b: two failures; task c: successes at turns 1 and 3."""
    return [
        make_episode("a", 2, task_type="pick", member=0, metrics={"regret": 1.0}, invalid_turns=(1,)),
        make_episode("a", None, 4, task_type="pick", member=1, metrics={"regret": 3.0}),
        make_episode("b", None, 4, task_type="pick", member=0, metrics={"regret": 2.0}),
        make_episode("b", None, 4, task_type="pick", member=1, metrics={"regret": 2.0}),
        make_episode("c", 1, task_type="heat", member=0, metrics={"regret": 0.0}),
        make_episode("c", 3, task_type="heat", member=1, metrics={"regret": 0.0}),
    ]


def test_headline_metrics_are_means_over_tasks(run):
    scored = score_records(run, max_turns=4)
    metrics = scored["metrics"]
    assert scored["counts"]["tasks"] == 3
    assert scored["counts"]["episodes"] == 6
    assert metrics["success_rate"]["value"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert metrics["mean_score"]["value"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert metrics["mean_turns"]["value"] == pytest.approx((3 + 4 + 2) / 3)
    assert metrics["env_metrics"]["regret"]["value"] == pytest.approx((2.0 + 2.0 + 0.0) / 3)
    # task a: one invalid step of 2 in its first episode (0.5) and none in the other -> 0.25
    assert metrics["invalid_action_rate"]["value"] == pytest.approx(0.25 / 3)
    for estimate in (metrics["success_rate"], metrics["mean_score"], metrics["env_metrics"]["regret"]):
        low, high = estimate["ci95"]
        assert low <= estimate["value"] <= high


def test_pass_at_k_and_the_pass_k_t_grid(run):
    metrics = score_records(run, max_turns=4)["metrics"]
    assert set(metrics["pass_at_k"]) == {"1", "2"}
    assert metrics["pass_at_k"]["1"]["value"] == pytest.approx(metrics["success_rate"]["value"])
    assert metrics["pass_at_k"]["2"]["value"] == pytest.approx((1 + 0 + 1) / 3)
    grid = metrics["pass_at_k_t"]
    assert grid["k"] == [1, 2]
    assert grid["T"] == [1, 2, 3, 4]
    # k=1: T=1 only c's first sample (0.5/3); T=2 adds a's (1/3); T=3 adds c's second (1.5/3)
    assert grid["values"][0] == pytest.approx([0.5 / 3, 1 / 3, 1.5 / 3, 1.5 / 3])
    # k=2: T=1 c has one success of two -> 1; T>=2 a and c both -> 2/3
    assert grid["values"][1] == pytest.approx([1 / 3, 2 / 3, 2 / 3, 2 / 3])


def test_breakdown_by_task_type(run):
    by_type = score_records(run)["by_task_type"]
    assert set(by_type) == {"pick", "heat"}
    assert by_type["pick"]["n_tasks"] == 2
    assert by_type["pick"]["success_rate"]["value"] == pytest.approx(0.25)
    assert by_type["heat"]["success_rate"]["value"] == 1.0
    assert by_type["pick"]["pass_at_k"]["2"]["value"] == pytest.approx(0.5)


def test_infrastructure_failures_are_counted_and_left_out(run, make_episode):
    broken = make_episode("b", None, 1, task_type="pick", member=2, failure_cause="infra")
    scored = score_records([*run, broken])
    assert scored["counts"]["excluded"] == {"infra": 1}
    assert scored["counts"]["episodes"] == 6
    assert scored["metrics"]["success_rate"]["value"] == pytest.approx(0.5)


def test_uneven_samples_limit_k_to_the_fewest(run, make_episode):
    scored = score_records([*run, make_episode("c", 2, task_type="heat", member=2)])
    assert scored["counts"]["samples_per_task"] == {"min": 2, "max": 3}
    assert set(scored["metrics"]["pass_at_k"]) == {"1", "2"}


def test_mixed_runs_are_refused_and_can_be_split(run, make_episode):
    other = [make_episode("a", 1, env="other")]
    with pytest.raises(InvalidArgument, match="score each run on its own"):
        score_records([*run, *other])
    assert [len(group) for group in group_runs([*run, *other])] == [6, 1]
    with pytest.raises(InvalidArgument, match="no episode records"):
        score_records([])


def test_rescoring_a_stored_file_gives_the_same_numbers(tmp_path, run):
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in run), encoding="utf-8")
    [entry] = rescore([path])
    assert entry["env"] == "toy"
    assert entry["policy"] == {"name": "hand"}
    assert entry["metrics"] == score_records(run)["metrics"]
    assert len(load_records([tmp_path])) == 6

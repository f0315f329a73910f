"""The durable episode file and task selection the resumable runner relies on."""

from __future__ import annotations

import json

from agentenvs.evaluation.runner import select_tasks
from agentenvs.evaluation.store import DurableAppender, finished, repair_tail


def test_appender_writes_whole_lines_and_repairs_a_torn_tail(tmp_path, make_episode):
    path = tmp_path / "episodes.jsonl"
    with DurableAppender(path) as store:
        store.append(make_episode("a", 1))
        store.append(make_episode("b", None))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(make_episode("c", 2))[:40])  # a kill in the middle of a write
    assert [r["task_id"] for r in finished(path)] == ["a", "b"]
    with DurableAppender(path) as store:  # reopening cuts the torn line off before appending
        store.append(make_episode("c", 2))
    assert [r["task_id"] for r in finished(path)] == ["a", "b", "c"]
    assert path.read_text(encoding="utf-8").endswith("\n")
    assert repair_tail(path) == 0
    assert finished(tmp_path / "missing.jsonl") == []


def test_limit_takes_tasks_round_robin_over_types_in_panel_order():
    tasks = [{"task_id": f"{kind}{i}", "task_type": kind} for kind in ("x", "y", "z") for i in range(3)]
    assert [t["task_id"] for t in select_tasks(tasks, 4)] == ["x0", "x1", "y0", "z0"]
    assert [t["task_id"] for t in select_tasks(tasks, 3)] == ["x0", "y0", "z0"]
    assert select_tasks(tasks, None) == tasks
    assert select_tasks(tasks, 100) == tasks
    untyped = [{"task_id": f"t{i}"} for i in range(5)]
    assert [t["task_id"] for t in select_tasks(untyped, 2)] == ["t0", "t1"]

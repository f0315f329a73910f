"""The demo's whole path (server, evaluations through it, leaderboard, summary) on its scripted policies.

The full ``make demo`` adds SmolLM2; it is measured by running it (see docs/evaluation.md), not here.
"""

from __future__ import annotations

import json

import pytest

from agentenvs.evaluation import demo


@pytest.mark.slow
def test_demo_serves_evaluates_and_builds_the_leaderboard(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path), "--envs", "bandit", "--policies", "random,expert", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "server at http://127.0.0.1:" in printed
    assert "open the leaderboard in a browser: file://" in printed
    html = tmp_path / "site" / "index.html"
    assert html.is_file() and (tmp_path / "site" / "leaderboard.md").is_file()
    runs = sorted(p.parent.name for p in (tmp_path / "runs").glob("*/results.json"))
    assert runs == ["bandit-test-expert-k4-n12", "bandit-test-random-k4-n12"]
    for name in runs:
        result = json.loads((tmp_path / "runs" / name / "results.json").read_text())
        assert result["protocol"]["servers"] == 1
    lines = [line for line in printed.splitlines() if line.startswith("bandit ")]
    assert len(lines) >= 2 and "expert" in lines[-2] and "100.0 [100.0, 100.0]" in lines[-2]
    assert json.loads((tmp_path / "demo.json").read_text())["wall_time_s"] > 0

"""Forecast on the leaderboard: oracle and base-rate baselines, Brier/log/CRPS columns, the reliability plot."""

from __future__ import annotations

import json
from pathlib import Path

from agentenvs.evaluation.baselines import FORECAST
from agentenvs.evaluation.leaderboard import build
from agentenvs.evaluation.runner import evaluate


def test_forecast_baselines_score_and_plot_calibration(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    scores = {}
    for planned in FORECAST[:3]:  # oracle (expert), base rate, always 0.5; SmolLM2 runs in the baselines job
        path = evaluate(planned.config(), tmp_path / planned.policy.replace(":", "-"), progress=False)
        result = json.loads(path.read_text())
        (results / f"{result['run_id']}.json").write_text(path.read_text())
        metrics = result["metrics"]
        assert {"brier", "log", "crps", "interval"} <= set(metrics["env_metrics"])
        assert "forecast_p" not in metrics["env_metrics"] and metrics["calibration"]["n"] == 60
        scores[planned.policy] = metrics["env_metrics"]["brier"]["value"]
    assert scores["expert"] < scores["baseline:base_rate"] and scores["expert"] < scores["baseline:half"]
    pages = build(results, tmp_path / "site")
    html = next(p for p in pages.values() if str(p).endswith(".html")).read_text()
    assert 'class="reliability"' in html and "ECE" in html

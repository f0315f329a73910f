"""The committed forecast panels are what the generator writes, and the oracle is calibrated and informative."""

from __future__ import annotations

from pathlib import Path

from agentenvs import panels
from agentenvs.forecast_scores import reliability
from agentenvs.tasks.forecast.generate import generate


def test_panels_regenerate_byte_identically(tmp_path: Path) -> None:
    generate(tmp_path)
    for split in ("train", "dev", "test"):
        assert panels.panel_hash("forecast", split, tmp_path) == panels.panel_hash("forecast", split)


def test_oracle_beats_base_rate_and_is_calibrated() -> None:
    rows = [t for t in panels.load_panel("forecast", "train") if t["kind"] == "binary"]
    outcomes = [t["outcome"] for t in rows]
    base = sum(outcomes) / len(outcomes)
    oracle_brier = sum((t["oracle"] - y) ** 2 for t, y in zip(rows, outcomes, strict=True)) / len(rows)
    base_brier = sum((base - y) ** 2 for y in outcomes) / len(rows)
    assert oracle_brier < base_brier - 0.03
    assert reliability([t["oracle"] for t in rows], outcomes)["ece"] < 0.1

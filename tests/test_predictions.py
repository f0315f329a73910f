"""The prediction store under kill -9, concurrent resolvers and bad input (agentenvs/predictions.py)."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.predictions import PredictionConflict, PredictionStore, UnknownPrediction

WRITER = r"""
import sys
from agentenvs.predictions import PredictionStore
store = PredictionStore(sys.argv[1])
start, count = int(sys.argv[2]), int(sys.argv[3])
for i in range(start, start + count):
    rid = f"r{i}"
    store.add(rid, f"q{i % 7}", "binary", (i % 10) / 10, {"question": i})
    print("add", rid, flush=True)
    if i % 3 == 0:
        store.resolve(rid, i % 2)
        print("res", rid, flush=True)
"""


def _run_and_kill(path: Path, start: int, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """Start a writer, kill -9 it after a random delay, return what it acknowledged."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(start), str(count)], stdout=subprocess.PIPE, text=True
    )
    first = proc.stdout.readline()  # the kill lands mid-stream, not during the interpreter's start-up
    time.sleep(rng.uniform(0.0, 0.3))
    proc.kill()
    out, _ = proc.communicate()
    return [tuple(line.split()) for line in (first + out).splitlines() if line.count(" ") == 1]


def test_kill_nine_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite"
    rng = random.Random(7)
    acked: dict[str, set[str]] = {"add": set(), "res": set()}
    for round_ in range(12):
        start = round_ * 40 - 20 if round_ else 0  # overlapping ranges: restarted writers re-add (idempotent)
        for verb, rid in _run_and_kill(path, max(0, start), 400, rng):
            acked[verb].add(rid)
        with PredictionStore(path) as store:
            assert store.integrity() == "ok"
            for rid in acked["add"]:
                assert store.get(rid).resolution_id == rid
            for rid in acked["res"]:
                pred = store.get(rid)
                assert pred.state == "resolved" and pred.outcome == int(rid[1:]) % 2
            rows = store.connection().execute("SELECT COUNT(*), COUNT(DISTINCT resolution_id) FROM predictions")
            total, distinct = rows.fetchone()
            assert total == distinct
    assert len(acked["add"]) > 20 and acked["res"]


def _resolve_all(args: tuple[str, int]) -> int:
    path, n = args
    store = PredictionStore(path)
    return sum(store.resolve(f"c{i}", 1) for i in range(n))


def test_concurrent_resolvers_resolve_once(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    with PredictionStore(path) as store:
        for i in range(60):
            store.add(f"c{i}", "q", "binary", 0.25)
    with ProcessPoolExecutor(4) as pool:
        wins = list(pool.map(_resolve_all, [(path, 60)] * 4))
    assert sum(wins) == 60
    with PredictionStore(path) as store:
        assert store.counts() == {"pending": 0, "resolved": 60, "voided": 0}
        assert store.get("c0").scores["brier"] == pytest.approx(0.5625)


def test_idempotent_add_and_conflicts(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path / "s.sqlite")
    assert store.add("a", "q1", "binary", 0.7) is True
    assert store.add("a", "q1", "binary", 0.7) is False
    with pytest.raises(PredictionConflict, match="another prediction"):
        store.add("a", "q1", "binary", 0.6)
    assert store.resolve("a", 1) is True
    assert store.resolve("a", True) is False
    with pytest.raises(PredictionConflict, match="already resolved"):
        store.resolve("a", 0)
    assert store.get("a").outcome == 1 and store.get("a").scores["brier"] == pytest.approx(0.09)
    store.add("v", "q1", "binary", 0.5)
    assert store.void("v", "annulled") is True and store.void("v") is False
    with pytest.raises(PredictionConflict, match="voided"):
        store.resolve("v", 1)
    with pytest.raises(PredictionConflict, match="cannot be voided"):
        store.void("a")


RULES = {"options": ["A", "B"], "center": 2.0, "scale": 2.0}
"""What scoring needs of a question: a choice's options, a number's center and scale (levels: 0.1, 0.5, 0.9)."""


@pytest.mark.parametrize(
    ("kind", "forecast", "match"),
    [
        ("binary", 1.5, r"\[0, 1\]"),
        ("binary", -0.1, r"\[0, 1\]"),
        ("binary", math.nan, "finite"),
        ("binary", math.inf, "finite"),
        ("binary", 10**400, "finite"),
        ("binary", "0.5", "finite"),
        ("binary", True, "finite"),
        ("choice", {"A": 0.5, "B": 0.6}, "sum to 1"),
        ("choice", {"A": 1.0, "B": 1.0}, "sum to 1"),
        ("choice", {"A": 1.2, "B": -0.2}, r"\[0, 1\]"),
        ("choice", {"A": 1.0}, "each option"),
        ("choice", {"A": 0.5, "B": 0.5, "Z": 0.0}, "each option"),
        ("numeric", {"0.1": 5.0, "0.5": 3.0, "0.9": 1.0}, "decrease"),
        ("numeric", {"1.5": 5.0}, r"\(0, 1\)"),
        ("numeric", {"0.000001": 0.0}, "exactly the levels 0.1, 0.5, 0.9"),
        ("numeric", {"0.1": 1.0, "0.9": 3.0}, "exactly the levels"),
        ("numeric", {"0.1": 1.0, "0.5": 2.0, "0.9": 3.0, "0.99": 9.0}, "exactly the levels"),
        ("numeric", {"0.1": 1.0, "0.10": 1.5, "0.5": 2.0, "0.9": 3.0}, "given twice"),
        ("numeric", {"0.1": 1.0, "0.5": math.inf, "0.9": 3.0}, "finite"),
        ("ternary", 0.5, "unknown question kind"),
    ],
)
def test_bad_forecasts_are_refused(tmp_path: Path, kind: str, forecast: object, match: str) -> None:
    store = PredictionStore(tmp_path / "b.sqlite")
    with pytest.raises(InvalidArgument, match=match):
        store.add("x", "q", kind, forecast, RULES)
    assert store.counts()["pending"] == 0


@pytest.mark.parametrize(
    ("kind", "payload", "match"),
    [
        ("choice", {}, "options"),
        ("numeric", {"scale": 2.0}, "center"),
        ("numeric", {"center": 2.0, "scale": 0.0}, "scale"),
        ("numeric", {"center": 2.0, "scale": 1.0, "quantiles": ["0.9", "0.1"]}, "increasing"),
    ],
)
def test_predictions_without_their_scoring_rules_are_refused(
    tmp_path: Path, kind: str, payload: dict, match: str
) -> None:
    forecast = {"A": 0.5, "B": 0.5} if kind == "choice" else {"0.1": 1.0, "0.5": 2.0, "0.9": 3.0}
    with pytest.raises(InvalidArgument, match=match):
        PredictionStore(tmp_path / "r.sqlite").add("x", "q", kind, forecast, payload)


def test_choice_within_tolerance_is_normalised_and_levels_are_canonical(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path / "n.sqlite")
    store.add("c", "q", "choice", {"A": 0.333, "B": 0.672}, RULES)
    assert sum(store.get("c").forecast.values()) == pytest.approx(1.0, abs=1e-12)
    store.add("n", "q", "numeric", {"0.90": 3.0, ".5": 2.0, "0.1": 1.0}, RULES)
    assert list(store.get("n").forecast) == ["0.1", "0.5", "0.9"]


def test_bad_outcomes_are_refused(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path / "o.sqlite")
    with pytest.raises(UnknownPrediction, match="resolution_id the episode gave"):
        store.resolve("nope", 1)
    store.add("b", "q", "binary", 0.5)
    store.add("c", "q", "choice", {"A": 0.5, "B": 0.5}, {"options": ["A", "B"]})
    store.add("n", "q", "numeric", {"0.1": 1.0, "0.5": 2.0, "0.9": 3.0}, {"center": 2.0, "scale": 2.0})
    for rid, outcome in [("b", 2), ("b", "yes"), ("c", "C"), ("n", math.nan), ("n", "3")]:
        with pytest.raises(InvalidArgument):
            store.resolve(rid, outcome)
    assert store.counts() == {"pending": 3, "resolved": 0, "voided": 0}
    store.resolve("n", 2.5)
    assert store.get("n").scores["covered"] == 1.0


def test_a_prediction_stored_under_older_rules_is_not_scored(tmp_path: Path) -> None:
    """A numeric forecast from before the fixed levels (no center, its own levels) gets an error, not a reward."""
    store = PredictionStore(tmp_path / "old.sqlite")
    store.add("n", "q", "numeric", {"0.1": 1.0, "0.5": 2.0, "0.9": 3.0}, RULES)
    store.connection().execute("""UPDATE predictions SET forecast='{"1e-06":0.0}', payload='{}'""")
    with pytest.raises(InvalidArgument, match=r"cannot be scored under the current rules.*void it"):
        store.resolve("n", 2.0)
    assert store.void("n", "stored under older rules") and store.counts()["voided"] == 1


def test_replay_reads_resolved_in_order(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path / "r.sqlite")
    for i in range(25):
        store.add(f"r{i:02d}", "q", "binary", 0.5)
        store.resolve(f"r{i:02d}", i % 2, now=100.0 + i // 5)
    got = [p.resolution_id for p in store.resolved(batch=4)]
    assert got == [f"r{i:02d}" for i in range(25)]
    assert [p.resolution_id for p in store.resolved(since=103.0)] == [f"r{i}" for i in range(20, 25)]

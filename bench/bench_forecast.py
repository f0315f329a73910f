"""Prediction-store costs: durable predictions/s and resolutions/s with 1 and 4 writer processes, p99 write
latency, store size per 100k predictions and replay read throughput, against what a user would write
instead (a fresh ``sqlite3.connect`` + INSERT + commit per prediction). Writes ``bench/results/forecast.json``.

Run as ``python bench/bench_forecast.py [--per-writer N]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sqlite3
import tempfile
import time
from pathlib import Path

from common import summarize, timed, write_result  # bench/common.py

from agentenvs.predictions import PredictionStore

NAIVE_SCHEMA = "CREATE TABLE IF NOT EXISTS p (id TEXT PRIMARY KEY, q TEXT, forecast REAL, outcome INTEGER)"


def _store_writer(args: tuple[str, int, int]) -> tuple[list[float], list[float]]:
    path, writer, count = args
    store = PredictionStore(path)
    ids = [f"w{writer}-{i}" for i in range(count)]
    adds = [
        timed(store.add, rid, f"q{i % 50}", "binary", (i % 10) / 10, {"writer": writer})[1] for i, rid in enumerate(ids)
    ]
    resolves = [timed(store.resolve, rid, i % 2)[1] for i, rid in enumerate(ids)]
    store.close()
    return adds, resolves


def _naive_writer(args: tuple[str, int, int]) -> tuple[list[float], list[float]]:
    path, writer, count = args
    adds, resolves, ids = [], [], [f"w{writer}-{i}" for i in range(count)]
    for sql, params, out in (
        ("INSERT INTO p (id, q, forecast) VALUES (?, ?, ?)", [(r, "q", 0.5) for r in ids], adds),
        ("UPDATE p SET outcome=? WHERE id=? AND outcome IS NULL", [(1, r) for r in ids], resolves),
    ):
        for values in params:
            started = time.perf_counter()
            conn = sqlite3.connect(path, timeout=30)
            conn.execute(sql, values)
            conn.commit()
            conn.close()
            out.append(time.perf_counter() - started)
    return adds, resolves


def run_writers(kind: str, writers: int, count: int, folder: Path) -> dict:
    """``writers`` processes, each ``count`` predictions then ``count`` resolutions, into one file."""
    path = str(folder / f"{kind}-{writers}.sqlite")
    if kind == "naive":
        with sqlite3.connect(path) as conn:
            conn.execute(NAIVE_SCHEMA)
    else:
        PredictionStore(path).close()
    started = time.perf_counter()
    with mp.get_context("spawn").Pool(writers) as pool:
        parts = pool.map(
            _store_writer if kind == "store" else _naive_writer, [(path, w, count) for w in range(writers)]
        )
    wall = time.perf_counter() - started
    adds = [s for a, _ in parts for s in a]
    resolves = [s for _, r in parts for s in r]
    # each writer adds then resolves; the two phases overlap across writers, so rates use summed busy time
    return {
        "writers": writers,
        "predictions": len(adds),
        "predictions_per_s": len(adds) / (sum(adds) / writers),
        "resolutions_per_s": len(resolves) / (sum(resolves) / writers),
        "wall_s": wall,
        "ops_per_s_wall": (len(adds) + len(resolves)) / wall,
        "add_latency": summarize(adds),
        "resolve_latency": summarize(resolves),
    }


def size_and_replay(count: int, folder: Path) -> dict:
    """Bytes per 100k predictions (resolved, after a checkpoint) and how fast ``resolved()`` reads them back."""
    path = folder / "size.sqlite"
    store = PredictionStore(path, synchronous="OFF")  # only the size and the read matter here
    conn = store.connection()
    for start in range(0, count, 1000):
        with store._write():  # one transaction per 1000 keeps the set-up short; single writes are timed above
            for i in range(start, min(count, start + 1000)):
                conn.execute(
                    "INSERT INTO predictions (resolution_id, question_id, kind, forecast, payload, state, created_at,"
                    " outcome, scores, resolved_at) VALUES (?, ?, 'binary', ?, ?, 'resolved', ?, '1', ?, ?)",
                    (f"event-w{i % 500}-00:{i:016x}", f"event-w{i % 500}-00", "0.7", '{"split":"train"}', 1.0 * i,
                     '{"brier":0.09,"log":-0.357,"reward":0.91}', 2.0 * i),
                )  # fmt: skip
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    rows, seconds = timed(lambda: sum(1 for _ in store.resolved()))
    store.close()
    return {"bytes_per_100k": size * 100_000 / count, "replay_rows": rows, "replay_rows_per_s": rows / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-writer", type=int, default=400, help="predictions per writer process")
    parser.add_argument("--size-rows", type=int, default=100_000)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-forecast-", dir=Path.cwd()) as scratch:
        folder = Path(scratch)
        result = {
            "store": [run_writers("store", w, args.per_writer, folder) for w in (1, 4)],
            "naive_connect_per_write": [run_writers("naive", w, args.per_writer, folder) for w in (1, 4)],
            "size_and_replay": size_and_replay(args.size_rows, folder),
            "notes": "store: PredictionStore (WAL, synchronous=FULL, BEGIN IMMEDIATE, one connection per process); "
            "naive: sqlite3.connect + execute + commit + close per write (rollback journal, the default). "
            "predictions_per_s/resolutions_per_s: operations per second of a writer's busy time times the writers; "
            "ops_per_s_wall: both phases over the wall time, process start included. The scratch folder is "
            "under the working directory, so the disk is the one a user would use.",
        }
    print(write_result("forecast", result, *([args.results] if args.results else [])))


if __name__ == "__main__":
    main()

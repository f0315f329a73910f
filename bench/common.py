"""Shared helpers for benchmarks: timing statistics and the JSON result file with machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def summarize(seconds: list[float]) -> dict[str, float]:
    """Median, p90, p99, mean and count of a list of durations, in milliseconds."""
    ordered = sorted(seconds)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "mean_ms": statistics.fmean(ordered) * 1000,
        "n": len(ordered),
    }


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": load,
    }


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json`` with the machine facts and the date."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    payload.update(result)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2, sort_keys=True))
    print(f"wrote {path}")
    return path

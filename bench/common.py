"""Shared helpers for benchmarks: timing statistics and the JSON result file with machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Sequence
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


def timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``call``'s result and the seconds it took."""
    started = time.perf_counter()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - started


Episode = tuple[dict[str, Any], str, Sequence[str]]
"""What a session plays: the reset options, a label for errors, the actions (an expert's plan)."""


def play_concurrently(
    url: str, env: str, sessions: int, episodes: int, pick: Callable[[int, int], Episode]
) -> dict[str, Any]:
    """``sessions`` threads, each with its own remote session on ``url``, each playing ``episodes`` episodes
    ``pick(session, episode)`` until they end; every step is timed and every episode must end in success."""
    import agentenvs

    errors: list[str] = []
    steps: list[float] = []
    lock = threading.Lock()

    def session(index: int) -> None:
        client = agentenvs.connect(url)
        try:
            remote = client.make(env)
            for episode in range(episodes):
                options, label, actions = pick(index, episode)
                remote.reset(seed=0, options=options)
                info: dict[str, Any] = {}
                for action in actions:
                    (_, _, terminated, truncated, info), took = timed(remote.step, action)
                    with lock:
                        steps.append(took)
                    if terminated or truncated:
                        break
                if not info.get("success"):
                    with lock:
                        errors.append(f"session {index} {label}: not solved")
            remote.close()
        except Exception as exc:
            with lock:
                errors.append(f"session {index}: {type(exc).__name__}: {exc}")
        finally:
            client.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"sessions": sessions, "episodes_per_session": episodes, "errors": errors, "wall_s": wall,
            "steps": len(steps), "steps_per_s": len(steps) / wall, "step": summarize(steps)}  # fmt: skip


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": load,
    }


def write_result(name: str, result: dict[str, Any], results: Path = RESULTS) -> Path:
    """Write ``<results>/<name>.json`` (default ``bench/results``) with the machine facts and the date."""
    results.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    payload.update(result)
    path = results / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2, sort_keys=True))
    print(f"wrote {path}")
    return path

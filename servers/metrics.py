"""Counters and histograms in the Prometheus text format, without a client library."""

from __future__ import annotations

import threading
from collections import defaultdict

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

Labels = tuple[tuple[str, str], ...]

HELP = {
    "agentenvs_requests_total": ("counter", "HTTP requests by route and status"),
    "agentenvs_request_duration_seconds": ("histogram", "HTTP request latency by route"),
    "agentenvs_env_call_duration_seconds": ("histogram", "time of a call into a worker process, by operation"),
    "agentenvs_steps_total": ("counter", "environment steps taken, by environment"),
    "agentenvs_errors_total": ("counter", "error answers, by error code"),
    "agentenvs_sessions_opened_total": ("counter", "sessions opened, by environment"),
    "agentenvs_sessions_closed_total": ("counter", "sessions closed, by reason"),
    "agentenvs_worker_restarts_total": ("counter", "worker processes that died and were replaced"),
    "agentenvs_workers_killed_total": (
        "counter",
        "suspect worker processes killed and replaced, by reason (heartbeat: silent; stuck: every thread overdue)",
    ),
    "agentenvs_sessions_active": ("gauge", "open sessions, by environment"),
    "agentenvs_workers_alive": ("gauge", "worker processes alive"),
    "agentenvs_workers_suspect": ("gauge", "worker processes alive but suspect (being replaced)"),
    "agentenvs_workers_ready": ("gauge", "worker processes that take new sessions now"),
    "agentenvs_worker_sessions": (
        "gauge",
        "session slots held on workers: open sessions, and closed ones whose overdue call still holds the environment",
    ),
    "agentenvs_calls_in_flight": ("gauge", "calls sent to workers and not answered yet (each holds a worker thread)"),
    "agentenvs_calls_overdue": ("gauge", "calls past their time limit that have not returned (each holds a thread)"),
    "agentenvs_requests_in_flight": ("gauge", "HTTP requests being served now"),
}


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    escaped = (f'{key}="{value}"'.replace("\n", " ") for key, value in labels)
    return "{" + ",".join(escaped) + "}"


class Metrics:
    """Thread-safe counters and fixed-bucket histograms; :meth:`render` writes the exposition text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = defaultdict(dict)
        self._histograms: dict[str, dict[Labels, list[float]]] = defaultdict(dict)

    def inc(self, name: str, labels: Labels = (), by: float = 1.0) -> None:
        with self._lock:
            series = self._counters[name]
            series[labels] = series.get(labels, 0.0) + by

    def observe(self, name: str, seconds: float, labels: Labels = ()) -> None:
        with self._lock:
            series = self._histograms[name]
            row = series.get(labels)
            if row is None:
                row = series[labels] = [0.0] * (len(LATENCY_BUCKETS) + 2)
            for index, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    row[index] += 1
                    break
            row[-2] += seconds
            row[-1] += 1

    def render(self, gauges: dict[str, dict[Labels, float]]) -> str:
        lines: list[str] = []

        def header(name: str) -> None:
            kind, text = HELP.get(name, ("untyped", name))
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")

        with self._lock:
            counters = {name: dict(series) for name, series in self._counters.items()}
            histograms = {name: {k: list(v) for k, v in series.items()} for name, series in self._histograms.items()}
        for name, series in sorted({**counters, **gauges}.items()):
            header(name)
            for labels, value in sorted(series.items()):
                lines.append(f"{name}{_labels(labels)} {value:g}")
        for name, series in sorted(histograms.items()):
            header(name)
            for labels, row in sorted(series.items()):
                cumulative = 0.0
                for index, bound in enumerate(LATENCY_BUCKETS):
                    cumulative += row[index]
                    lines.append(f"{name}_bucket{_labels((*labels, ('le', f'{bound:g}')))} {cumulative:g}")
                lines.append(f"{name}_bucket{_labels((*labels, ('le', '+Inf')))} {row[-1]:g}")
                lines.append(f"{name}_sum{_labels(labels)} {row[-2]:.6f}")
                lines.append(f"{name}_count{_labels(labels)} {row[-1]:g}")
        return "\n".join(lines) + "\n"

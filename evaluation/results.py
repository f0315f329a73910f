"""The results file (schema ``agentenvs.results/1``): one evaluation run, fully described.

A results file names exactly what was measured (environment version, split, panel hash, policy and
sampling settings, k, the task limit), the metrics with their intervals, when, and on what hardware,
so a leaderboard row can always be traced back and re-scored from its episode file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

RESULTS_SCHEMA = "agentenvs.results/1"
RESULTS_SCHEMA_PREFIX = "agentenvs.results/"


def policy_label(policy: dict[str, Any]) -> str:
    """A short name for a policy: its name, plus the model where one is named."""
    name = str(policy.get("name") or "unknown")
    model = str(policy.get("model") or "").rstrip("/").rsplit("/", 1)[-1]  # a checkpoint path: its folder name
    return f"{name}:{model}" if model and str(model) not in name else name


def hardware() -> dict[str, Any]:
    """The machine an evaluation ran on (CPU count, platform, accelerator where torch sees one)."""
    facts: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    if hasattr(os, "getloadavg"):
        facts["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["torch"] = torch.__version__
        facts["accelerator"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    else:
        facts["accelerator"] = "cpu"
    return facts


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def make_results(
    *,
    env: dict[str, Any],
    policy: dict[str, Any],
    sampling: dict[str, Any],
    protocol: dict[str, Any],
    scored: dict[str, Any],
    episodes_file: Path | None = None,
    wall_time_s: float | None = None,
) -> dict[str, Any]:
    """Assemble a results document from the run's settings and :func:`scoring.score_records` output."""
    from agentenvs import __version__

    result: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "created_at": utc_now(),
        "agentenvs_version": __version__,
        "env": env,
        "policy": policy,
        "policy_label": policy_label(policy),
        "sampling": sampling,
        "protocol": protocol,
        **scored,
        "hardware": hardware(),
    }
    if wall_time_s is not None:
        result["wall_time_s"] = round(wall_time_s, 2)
    if episodes_file is not None:
        result["episodes"] = {"file": episodes_file.name, "sha256": sha256_of(episodes_file)}
    return result


def write_results(result: dict[str, Any], path: Path) -> Path:
    """Write a results document atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    scratch.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(scratch, path)
    return path

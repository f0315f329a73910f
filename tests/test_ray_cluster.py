"""A 2-node Ray cluster on this machine (make test-containers): 256 sessions over both nodes, the worker
killed mid-run. Runs bench/bench_ray.py, which keeps the cluster in a private network namespace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentenvs.ray_cluster import private_network_command

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.containers
def test_a_dead_worker_node_fails_only_its_sessions_and_new_ones_go_to_the_survivor(tmp_path):
    pytest.importorskip("ray", reason="needs ray 2.60.0 (make install)")
    if private_network_command(["true"]) is None:
        pytest.skip("no private network namespace here (needs unshare and ip, as root or with user namespaces)")
    command = [sys.executable, "bench/bench_ray.py", "--sessions", "256", "--episodes", "768", "--out", str(tmp_path)]
    answer = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    result = json.loads((tmp_path / "ray.json").read_text())["ray_env_pool_2_nodes"]
    steady, killed = result["steady"], result["worker_killed"]
    assert steady["errors"] == [] and set(steady["failure_causes"]) <= {"none", "policy"}
    assert len(steady["sessions_per_node_at_first_record"]) == 2, "the sessions are spread over both nodes"
    assert min(steady["sessions_per_node_at_first_record"]) > 0
    assert killed["sessions_on_worker_at_kill"] > 0 and killed["lost_sessions_all_on_worker"]
    assert killed["sessions_lost"] <= killed["sessions_on_worker_at_kill"], "only the worker's sessions failed"
    assert killed["failure_causes"].get("infra", 0) == killed["sessions_lost"], killed["errors"]
    assert killed["sessions_opened_after_kill"] > 0 and killed["sessions_opened_after_kill_on_worker"] == 0
    assert killed["episodes"] == 768

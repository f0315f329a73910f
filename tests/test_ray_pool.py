"""RayEnvPool on a local one-node Ray (the checks in ray_pool_checks.py), kept inside a private network
namespace because Ray binds every interface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentenvs.ray_cluster import private_network_command

HERE = Path(__file__).resolve().parent


def run_checks_privately(checks: str, timeout_s: int) -> subprocess.CompletedProcess:
    """Run the pytest file ``checks`` in a network namespace with only loopback, or skip where none can be made."""
    pytest.importorskip("ray", reason="RayEnvPool needs ray (make install puts ray 2.60.0 in)")
    command = private_network_command([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", checks])
    if command is None:
        pytest.skip("no private network namespace here (needs unshare and ip, as root or with user namespaces)")
    return subprocess.run(command, cwd=HERE.parent, capture_output=True, text=True, timeout=timeout_s)


def test_ray_env_pool_on_a_local_one_node_ray():
    answer = run_checks_privately(str(HERE / "ray_pool_checks.py"), timeout_s=400)
    assert answer.returncode == 0, answer.stdout[-4000:] + answer.stderr[-2000:]
    assert "7 passed" in answer.stdout and "skipped" not in answer.stdout, answer.stdout[-2000:]

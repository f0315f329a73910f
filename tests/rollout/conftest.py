"""Shared fixtures of the rollout tests: the test environment module on sys.path and registered."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agentenvs  # noqa: E402

agentenvs.register("flaky", "rollout_envs_for_tests:FlakyEnv", overwrite=True)
FLAKY_SERVE_ARG = "flaky=rollout_envs_for_tests:FlakyEnv"
PYTHONPATH = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))}

"""The conformance suite over every registered environment: built-ins, packages and new-env skeletons alike.

Every check runs on every environment, the anchor and reward-integrity checks included: none may skip."""

from __future__ import annotations

import functools

import pytest

import agentenvs
from agentenvs.cli_envs import engine_status
from agentenvs.testing import check_text_env


@pytest.mark.slow
@pytest.mark.parametrize("name", agentenvs.list_envs())
def test_every_registered_environment_passes_the_conformance_suite(name: str):
    ready, why = engine_status(agentenvs.spec(name))
    if not ready:
        pytest.skip(f"{name}'s engine is not installed: {why}")
    report = check_text_env(functools.partial(agentenvs.make, name), max_steps=12, fuzz_examples=25)
    assert "cross_process" in report.passed
    assert "anchor" in report.passed, report.skipped.get("anchor")
    assert "reward_integrity" in report.passed

"""The conformance suite over every registered environment: built-ins, packages and new-env skeletons alike."""

from __future__ import annotations

import functools

import pytest

import agentenvs
from agentenvs.cli_envs import engine_status
from agentenvs.testing import ConformanceError, check_text_env

KNOWN_EXPLOITS = {
    "forecast": (
        "pending mode ends any valid forecast with success=True: the generic exploits echo_instructions (the "
        "instructions' example <answer>) and echo_observation reach success; envs/forecast is being fixed"
    ),
}
"""Environments a generic exploit still beats, each with what wins; strict, so the mark must go once fixed."""


class KnownExploit(AssertionError):
    """Only the reward integrity check failed, on an environment listed in KNOWN_EXPLOITS."""


def marked(name: str) -> object:
    if name not in KNOWN_EXPLOITS:
        return name
    return pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_EXPLOITS[name], raises=KnownExploit, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", [marked(name) for name in agentenvs.list_envs()])
def test_every_registered_environment_passes_the_conformance_suite(name: str):
    ready, why = engine_status(agentenvs.spec(name))
    if not ready:
        pytest.skip(f"{name}'s engine is not installed: {why}")
    try:
        report = check_text_env(functools.partial(agentenvs.make, name), max_steps=12, fuzz_examples=25)
    except ConformanceError as error:
        if name in KNOWN_EXPLOITS and set(error.failures) == {"reward_integrity"}:
            raise KnownExploit(error.failures["reward_integrity"]) from error
        raise
    assert "cross_process" in report.passed
    assert "anchor" in report.passed, report.skipped.get("anchor")
    assert "reward_integrity" in report.passed

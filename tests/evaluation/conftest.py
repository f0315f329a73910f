"""Episode records built by hand, so metrics can be checked against numbers worked out on paper."""

from __future__ import annotations

from typing import Any

import pytest

from agentenvs.rollout.records import EpisodeRecord, StepRecord


def episode(
    task_id: str,
    success_turn: int | None,
    num_turns: int = 5,
    *,
    env: str = "toy",
    split: str = "test",
    member: int = 0,
    task_type: str | None = None,
    policy: str = "hand",
    metrics: dict[str, float] | None = None,
    invalid_turns: tuple[int, ...] = (),
    failure_cause: str = "none",
) -> dict[str, Any]:
    """One episode record as a dict: success at ``success_turn`` (None: never), ``num_turns`` steps."""
    success = success_turn is not None
    turns = success_turn if success else num_turns
    steps = [
        StepRecord(
            turn=t,
            observation=f"obs {t}",
            response=f"<action>a{t}</action>",
            action=f"a{t}",
            action_span=[8, 8 + len(f"a{t}")],
            reward=1.0 if success and t == turns else 0.0,
            terminated=success and t == turns,
            truncated=not success and t == turns,
            info={"action_valid": t not in invalid_turns, "metrics": dict(metrics or {})},
        )
        for t in range(1, turns + 1)
    ]
    return EpisodeRecord(
        episode_id=f"{task_id}#{member}",
        group_id=task_id,
        env=env,
        env_version="1",
        split=split,
        panel_hash="0" * 64,
        task_id=task_id,
        task_type=task_type,
        seed=0,
        policy={"name": policy},
        sampling={"temperature": 1.0},
        steps=steps,
        return_=1.0 if success else 0.0,
        success=success,
        score=1.0 if success else 0.0,
        end_reason="success" if success else "max_turns",
        success_turn=success_turn,
        num_turns=turns,
        failure_cause=failure_cause,
    ).to_dict()


@pytest.fixture
def make_episode():
    return episode

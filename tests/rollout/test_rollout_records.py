"""Episode records: JSON round trips, JSONL files, the token layout helpers, and clear refusals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import (
    SCHEMA,
    EpisodeRecord,
    StepRecord,
    TokenRecord,
    step_info,
)
from agentenvs.rollout.store import read_jsonl, write_jsonl


def make_record(episode_id: str = "bandit/test/t0/7/0", tokens: TokenRecord | None = None) -> EpisodeRecord:
    step = StepRecord(
        turn=1,
        observation="Arms: pull[0] pull[1]",
        response="I pick <action>pull[1]</action>",
        action="pull[1]",
        action_span=[17, 24],
        reward=1.0,
        terminated=True,
        truncated=False,
        info={"action_valid": True, "success": True, "score": 0.5, "end_reason": "success"},
    )
    return EpisodeRecord(
        episode_id=episode_id,
        group_id="bandit/test/t0/7",
        env="bandit",
        env_version="1",
        split="test",
        panel_hash="abc",
        task_id="t0",
        task_type="bernoulli-k2",
        seed=7,
        policy={"name": "random", "seed": 0},
        sampling={"temperature": 1.0},
        steps=[step],
        final_observation="done",
        return_=1.0,
        success=True,
        score=0.5,
        end_reason="success",
        success_turn=1,
        num_turns=1,
        tokens=tokens,
        started_at="2026-12-02T15:00:00+00:00",
    )


def two_turn_tokens() -> TokenRecord:
    tokens = TokenRecord(tokenizer="tok")
    tokens.add_turn([1, 2, 3], [10, 11], [-0.5, -0.25], [0, 1])
    tokens.add_turn([4, 5], [12], [-1.0], [1])
    return tokens


def test_record_round_trips_through_json_with_the_brief_field_names():
    record = make_record(tokens=two_turn_tokens())
    line = record.to_json()
    assert "\n" not in line
    data = json.loads(line)
    assert data["schema"] == SCHEMA and data["return"] == 1.0 and "return_" not in data
    required = {
        "episode_id", "group_id", "env", "env_version", "split", "panel_hash", "task_id", "task_type", "seed",
        "policy", "sampling", "steps", "final_observation", "return", "success", "score", "end_reason",
        "success_turn", "num_turns", "failure_cause", "error", "timings", "started_at", "tokens",
    }  # fmt: skip
    assert required <= set(data)
    assert set(data["tokens"]) >= {"prompt_ids", "response_ids", "response_logprobs", "loss_mask", "action_mask"}
    assert EpisodeRecord.from_json(line) == record
    assert EpisodeRecord.from_json(data) == record


def test_records_without_tokens_round_trip():
    record = make_record()
    assert json.loads(record.to_json())["tokens"] is None
    assert EpisodeRecord.from_json(record.to_json()) == record


def test_token_layout_helpers():
    tokens = two_turn_tokens()
    assert tokens.check() == []
    assert tokens.loss_mask == [[0, 0, 0, 1, 1], [0, 0, 1]]
    assert tokens.action_mask == [[0, 0, 0, 0, 1], [0, 0, 1]]
    sequence = tokens.sequence()
    assert sequence.ids == [1, 2, 3, 10, 11, 4, 5, 12]
    assert sequence.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert sequence.logprobs == [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, -1.0]
    second = tokens.turn_sample(1)
    assert second.prompt_ids == [1, 2, 3, 10, 11, 4, 5]
    assert second.response_ids == [12] and second.action_mask == [1]


def test_windowed_token_records_refuse_one_sequence_and_keep_full_prompts():
    tokens = TokenRecord(incremental=False)
    tokens.add_turn([1, 2], [3], [-0.1], [1])
    tokens.add_turn([1, 9], [4], [-0.2], [0])
    assert tokens.turn_sample(1).prompt_ids == [1, 9]
    with pytest.raises(InvalidArgument, match="turn_sample"):
        tokens.sequence()


def test_add_turn_refuses_misaligned_lists():
    with pytest.raises(InvalidArgument, match="one logprob"):
        TokenRecord().add_turn([1], [2, 3], [-0.1], [0, 0])


def test_check_reports_broken_lengths():
    tokens = two_turn_tokens()
    tokens.loss_mask[1] = [1]
    assert any("loss_mask" in p for p in tokens.check())


def test_step_info_keeps_the_record_subset_only():
    info = {"action_valid": True, "admissible_actions": ["a"], "privileged": {"x": 1}, "turn": 3, "anchor": "h"}
    assert step_info(info) == {"action_valid": True, "anchor": "h"}


def test_from_json_refuses_other_schemas_and_missing_fields():
    data = json.loads(make_record().to_json())
    with pytest.raises(InvalidArgument, match="agentenvs rollout"):
        EpisodeRecord.from_json({**data, "schema": "other/1"})
    del data["task_id"]
    with pytest.raises(InvalidArgument, match="task_id"):
        EpisodeRecord.from_json(data)
    with pytest.raises(InvalidArgument, match="failure_cause"):
        EpisodeRecord.from_json({**json.loads(make_record().to_json()), "failure_cause": "bad"})


def test_jsonl_write_read_and_folder_reading(tmp_path):
    records = [make_record(f"e{i}", two_turn_tokens() if i % 2 else None) for i in range(3)]
    path = write_jsonl(tmp_path / "a" / "episodes.jsonl", records)
    assert list(read_jsonl(path)) == records
    assert list(read_jsonl(path.parent)) == records
    path.write_text(path.read_text() + json.dumps({**records[0].to_dict(), "schema": "agentenvs.episode/0"}) + "\n")
    with pytest.raises(InvalidArgument, match="record 4 is not a valid episode record"):
        list(read_jsonl(path))


def test_usable_for_training_drops_infrastructure_failures():
    record = make_record()
    assert record.usable_for_training
    for cause in ("infra", "timeout"):
        record.failure_cause = cause
        assert not record.usable_for_training


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.lists(st.integers(0, 50000), max_size=6),
            st.lists(st.tuples(st.integers(0, 50000), st.floats(-20, 0), st.booleans()), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=4,
    ),
    text=st.text(max_size=30),
)
def test_any_token_record_and_text_round_trip(turns, text):
    tokens = TokenRecord()
    for prompt, response in turns:
        tokens.add_turn(prompt, [r[0] for r in response], [r[1] for r in response], [int(r[2]) for r in response])
    record = make_record(tokens=tokens)
    record.steps[0].response = text
    again = EpisodeRecord.from_json(record.to_json())
    assert again == record and again.tokens.check() == []
    assert len(again.tokens.sequence().ids) == sum(len(p) + len(r) for p, r in turns)


def test_a_turn_without_logprobs_keeps_none_never_zeros():
    tokens = TokenRecord(tokenizer="tok")
    tokens.add_turn([1, 2], [10, 11], None, [0, 1])
    tokens.add_turn([3], [12], [-0.5], [1])
    assert tokens.check() == []
    assert tokens.turn_sample(0).response_logprobs is None and tokens.turn_sample(1).response_logprobs == [-0.5]
    assert tokens.sequence().logprobs is None  # a consumer must not read a gap as log 1
    again = EpisodeRecord.from_json(make_record(tokens=tokens).to_json()).tokens
    assert again.response_logprobs == [None, [-0.5]]


def test_schema_1_records_still_load_and_keep_their_schema():
    data = {**json.loads(make_record().to_json()), "schema": "agentenvs.episode/1"}
    for step in data["steps"]:
        del step["anchor"]
    record = EpisodeRecord.from_json(data)
    assert record.schema == "agentenvs.episode/1" and record.steps[0].anchor is None
    assert EpisodeRecord.from_json(make_record().to_json()).schema == SCHEMA == "agentenvs.episode/2"

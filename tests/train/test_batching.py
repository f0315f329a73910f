"""Rows and padded batches: every response id is scored exactly as in an unpadded forward pass."""

from __future__ import annotations

import pytest
import torch

from agentenvs.rollout.records import EpisodeRecord, StepRecord, TokenRecord
from agentenvs.train import tiny
from agentenvs.train.batching import collate, response_logits, rows_from_records, token_logprobs


def record_with_tokens() -> EpisodeRecord:
    tokens = TokenRecord()
    tokens.add_turn([10, 11, 12], [20, 21], [-0.1, -0.2], [0, 1])
    tokens.add_turn([13], [22, 23, 24], [-0.3, -0.4, -0.5], [1, 1, 0])
    steps = [
        StepRecord(turn=t + 1, observation="o", response="r", action="a", action_span=None, reward=0.0,
                   terminated=t == 1, truncated=False)
        for t in range(2)
    ]  # fmt: skip
    return EpisodeRecord(
        episode_id="e", group_id="g", env="bandit", env_version="1", split="train", panel_hash="", task_id="t",
        task_type=None, seed=0, policy={}, sampling={}, steps=steps, tokens=tokens,
    )  # fmt: skip


def test_rows_carry_full_context_and_their_turn_advantage():
    rows = rows_from_records([record_with_tokens()], [[0.5, -1.0]])
    assert [r.prompt_ids for r in rows] == [[10, 11, 12], [10, 11, 12, 20, 21, 13]]
    assert [r.response_ids for r in rows] == [[20, 21], [22, 23, 24]]
    assert [r.advantage for r in rows] == [0.5, -1.0]
    assert rows[1].action_mask == [1, 1, 0]
    assert rows_from_records([record_with_tokens()], [[1.0, 1.0]], keep=[False]) == []


def test_collate_aligns_responses_and_masks_observations():
    rows = rows_from_records([record_with_tokens()], [[0.5, -1.0]])
    batch = collate(rows, pad_id=0)
    assert batch.input_ids.tolist() == [[0, 0, 0, 10, 11, 12, 20, 21, 0], [10, 11, 12, 20, 21, 13, 22, 23, 24]]
    assert batch.targets.tolist() == [[20, 21, 0], [22, 23, 24]]
    assert batch.response_mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch.advantages.tolist() == [[0.5, 0.5, 0.0], [-1.0, -1.0, -1.0]]
    assert batch.action_mask.tolist() == [[0, 1, 0], [1, 1, 0]]
    assert batch.position_ids[0].tolist()[3:8] == [0, 1, 2, 3, 4]


def test_padded_logprobs_equal_unpadded_forward():
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, hidden_size=32, layers=1, heads=2, intermediate_size=64).eval()
    rows = rows_from_records([record_with_tokens()], [[1.0, 1.0]])
    batch = collate(rows, pad_id=tokenizer.pad_token_id)
    with torch.no_grad():
        padded = token_logprobs(response_logits(model, batch), batch.targets)
        for i, row in enumerate(rows):
            ids = torch.tensor([row.prompt_ids + row.response_ids])
            logits = model(input_ids=ids).logits[0, len(row.prompt_ids) - 1 : -1]
            alone = torch.log_softmax(logits, -1).gather(-1, torch.tensor(row.response_ids)[:, None])[:, 0]
            assert padded[i, : len(row.response_ids)].tolist() == pytest.approx(alone.tolist(), abs=1e-5)


def test_rows_need_token_ids():
    record = record_with_tokens()
    record.tokens = None
    with pytest.raises(Exception, match="no token ids"):
        rows_from_records([record], [[1.0, 1.0]])

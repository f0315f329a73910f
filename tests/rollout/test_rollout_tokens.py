"""Token masks line up with the chat template, for SmolLM2's template and a Qwen-style one.

The responses here are scripted token ids (what a model would have sampled), so every case is exact;
the templates and tokenizers are real: SmolLM2's own (from the embedded checkpoint) and a ChatML
byte-level BPE tokenizer trained here in code with Qwen2.5's and a Qwen3-style template (nothing is
downloaded). The driver's actor builds the context (previous ids + templated observation + sampled ids)
and the tests compare it with what the template renders for the whole conversation.
"""

from __future__ import annotations

import pytest

from agentenvs.actions import extract_action
from agentenvs.rollout.llm import Generation, LLMPolicy, Sampling
from agentenvs.rollout.policy import EpisodeContext
from agentenvs.rollout.prompting import HistoryConfig
from agentenvs.rollout.tokens import ChatTokens

QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'system' and not loop.first) "
    "or message.role == 'assistant' %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
QWEN3_STYLE_TEMPLATE = (
    "{%- for message in messages %}{%- if message.role == 'assistant' %}{%- set content = message.content %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Like Qwen3's: reasoning is stripped from earlier assistant turns when the conversation is re-rendered."""

SYSTEM = "You are playing a bandit. Answer with <action>pull[i]</action>."
OBSERVATIONS = [
    "Arms: pull[0] red | pull[1] blue\nNo pulls yet.",
    "Last pull: pull[1] blue paid 1.000.\nPulls left: 2",
    "Last pull: pull[0] red paid 0.000.\nPulls left: 1",
]
RESPONSES = [
    "Let me try blue first. <action>pull[1]</action>",
    "<think>blue paid; try red too</think>\nExploring. <action>pull[0]</action>",
    "Blue looks better.\n<action>pull[1]</action>",
]


def chatml_tokenizer(template: str):
    """A byte-level BPE tokenizer with ChatML specials, trained in a second on the texts above."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator([SYSTEM, *OBSERVATIONS, *RESPONSES, "system user assistant"] * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from agentenvs.rollout.smollm2 import smollm2_checkpoint

    return AutoTokenizer.from_pretrained(str(smollm2_checkpoint()))


TOKENIZERS = ["smollm2", "qwen2.5", "qwen3-style"]


@pytest.fixture(params=TOKENIZERS)
def tokenizer(request):
    if request.param == "smollm2":
        return request.getfixturevalue("smollm2_tokenizer")
    return chatml_tokenizer(QWEN25_TEMPLATE if request.param == "qwen2.5" else QWEN3_STYLE_TEMPLATE)


class ScriptedTokens(LLMPolicy):
    """Answers each turn with the next scripted token ids, as a model's sampler would hand them over."""

    name = "scripted-tokens"

    def __init__(self, tokenizer, responses: list[list[int]], history: HistoryConfig | None = None):
        super().__init__(Sampling(), history or HistoryConfig(), seed=0)
        self.chat = ChatTokens(tokenizer)
        self.responses = list(responses)

    def generate_ids(self, prompt_ids, seed, timeout_s):
        ids = self.responses.pop(0)
        return Generation(text="", token_ids=ids, logprobs=[-0.5] * len(ids), prompt_ids=prompt_ids)


def context() -> EpisodeContext:
    return EpisodeContext(
        env="bandit",
        description={"instructions": SYSTEM},
        task_id="t",
        split="test",
        seed=0,
        group_id="g",
        episode_id="g/0",
        member=0,
        policy_seed=1,
        extract_action=extract_action,
    )


def sampled(tokenizer, text: str, end: bool = True) -> list[int]:
    """What a model samples for ``text``: its canonical ids, then the end-of-turn token."""
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.eos_token_id] if end else ids


def play(policy: ScriptedTokens, observations: list[str]):
    actor = policy.begin(context())
    decisions = [actor.act(observation, {}) for observation in observations]
    return actor, decisions


def conversation(responses: list[str], final_observation: str | None):
    messages = [{"role": "system", "content": SYSTEM}]
    for observation, response in zip(OBSERVATIONS, responses, strict=False):
        messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": response}]
    if final_observation is not None:
        messages.append({"role": "user", "content": final_observation})
    return messages


def test_full_history_ids_equal_the_template_of_the_whole_conversation(tokenizer):
    policy = ScriptedTokens(tokenizer, [sampled(tokenizer, r) for r in RESPONSES[:2]])
    actor, decisions = play(policy, OBSERVATIONS[:2])
    assert [d.response for d in decisions] == RESPONSES[:2]
    tokens = actor.tokens()
    assert tokens.incremental and tokens.check() == []
    # the next turn's prompt, built incrementally, is exactly the template's rendering of it ...
    next_prompt = policy.chat.next_turn_ids(SYSTEM, OBSERVATIONS[2], tokens.response_ids[-1])
    ids = tokens.sequence().ids + next_prompt
    rendered = tokenizer.apply_chat_template(conversation(RESPONSES[:2], OBSERVATIONS[2]), tokenize=False,
                                             add_generation_prompt=True)  # fmt: skip
    if "</think>" in RESPONSES[1] and "</think>" not in rendered:
        # ... except where the template rewrites history (Qwen3 strips reasoning): the record keeps what
        # was sampled, so the reasoning stays, and re-rendering would have drifted from the sampled ids.
        assert "<think>" in tokenizer.decode(ids)
        rendered = rendered.replace(RESPONSES[1].split("</think>")[-1].lstrip("\n"), RESPONSES[1])
    assert tokenizer.decode(ids) == rendered
    assert ids == list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def test_loss_mask_covers_exactly_the_sampled_ids(tokenizer):
    responses = [sampled(tokenizer, r) for r in RESPONSES]
    actor, _ = play(ScriptedTokens(tokenizer, responses), OBSERVATIONS)
    sequence = actor.tokens().sequence()
    masked = [i for i, m in zip(sequence.ids, sequence.loss_mask, strict=True) if m]
    assert masked == [i for r in responses for i in r]
    # every run of 1s is one response, in order, ending with the end-of-turn token the model sampled
    runs, current = [], []
    for token, bit in zip(sequence.ids, sequence.loss_mask, strict=True):
        if bit:
            current.append(token)
        elif current:
            runs, current = [*runs, current], []
    runs.append(current)
    assert runs == responses
    assert all(lp == -0.5 for lp, m in zip(sequence.logprobs, sequence.loss_mask, strict=True) if m)


def test_action_mask_marks_the_action_tokens_and_nothing_else(tokenizer):
    responses = [sampled(tokenizer, r) for r in RESPONSES]
    actor, decisions = play(ScriptedTokens(tokenizer, responses), OBSERVATIONS)
    tokens = actor.tokens()
    for turn, decision in enumerate(decisions):
        sample = tokens.turn_sample(turn)
        marked = [i for i, m in zip(sample.response_ids, sample.action_mask, strict=True) if m]
        text = tokenizer.decode(marked)
        assert decision.action.action in text  # every action character is covered ...
        assert text.strip() in decision.response  # ... by a contiguous piece of the response
        assert len(text) <= len(decision.action.action) + 8  # and by little more than the action
        assert sample.action_mask[-1] == 0  # the end-of-turn token is no part of the action


def test_no_retokenization_drift_with_non_canonical_samples(tokenizer):
    """A sampler may emit ids that re-encoding the text would merge differently; the record keeps them."""
    odd = [tokenizer.convert_tokens_to_ids(t) for t in tokenizer.convert_ids_to_tokens(sampled(tokenizer, "pull"))]
    letters = [i for ch in "<action>pull[1]</action>" for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]
    response = [*letters, tokenizer.eos_token_id]
    assert response != sampled(tokenizer, "<action>pull[1]</action>")  # canonical encoding merges the letters
    assert odd  # the tokenizer works at all
    actor, decisions = play(ScriptedTokens(tokenizer, [response, response]), OBSERVATIONS[:2])
    tokens = actor.tokens()
    assert tokens.response_ids == [response, response]
    assert decisions[0].action.action == "pull[1]"
    sequence = tokens.sequence()
    rendered = tokenizer.apply_chat_template(
        conversation([decisions[0].response], OBSERVATIONS[1]), tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.decode(sequence.ids[: -len(response)]) == rendered
    assert sequence.ids[: -len(response)] != list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def test_truncated_response_gets_the_end_of_turn_from_the_template(tokenizer):
    """A response cut by max_tokens has no end-of-turn token: the template's one goes into the prompt ids."""
    cut = sampled(tokenizer, "Let me think about pull[1]", end=False)
    actor, _ = play(ScriptedTokens(tokenizer, [cut, sampled(tokenizer, RESPONSES[1])]), OBSERVATIONS[:2])
    tokens = actor.tokens()
    assert tokens.prompt_ids[1][0] == tokenizer.eos_token_id and tokens.loss_mask[1][0] == 0
    rendered = tokenizer.apply_chat_template(
        conversation(["Let me think about pull[1]"], OBSERVATIONS[1]), tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.decode(tokens.context_ids(1)) == rendered


def test_windowed_history_records_each_turns_whole_prompt(tokenizer):
    responses = [sampled(tokenizer, r) for r in RESPONSES]
    policy = ScriptedTokens(tokenizer, responses, HistoryConfig(mode="last_k", k=1, keep_first_observation=False))
    actor, decisions = play(policy, OBSERVATIONS)
    tokens = actor.tokens()
    assert not tokens.incremental and tokens.check() == []
    window = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": OBSERVATIONS[1]},
        {"role": "assistant", "content": decisions[1].response},
        {"role": "user", "content": OBSERVATIONS[2]},
    ]
    rendered = tokenizer.apply_chat_template(window, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(tokens.turn_sample(2).prompt_ids) == rendered
    assert OBSERVATIONS[0] not in tokenizer.decode(tokens.turn_sample(2).prompt_ids)


SPAN_CORPUS = [
    *RESPONSES,
    "",
    " leading and  double  spaces , before punctuation . and 'quotes' n't",
    "Ünïcödé: café, naïve, 中文字符, 日本語, 한국어, emoji 😀🎉👍🏽 and a flag 🇫🇷 <action>go north</action>",
    "code: def f(x):\n\treturn {'a': [1, 2]}  # ok\r\n<action>take key from drawer 1</action>",
    "\n\n\n<action>pull[0]</action>\n\n",
    "a" * 300 + " <action>" + "b" * 100 + "</action>",
]


def exact_spans(chat: ChatTokens, response_ids: list[int]) -> list[tuple[int, int]]:
    """The spans as measured before they were made incremental: the text of every prefix decoded."""
    body = chat.strip_stop(response_ids)
    spans, previous = [], 0
    for i in range(len(body)):
        length = max(previous, len(chat.tokenizer.decode(body[: i + 1], skip_special_tokens=False)))
        spans.append((previous, length))
        previous = length
    return spans + [(previous, previous)] * (len(response_ids) - len(body))


def metaspace_tokenizer():
    """A SentencePiece-style tokenizer (Llama 2, Mistral): metaspace, byte fallback for unseen characters."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    backend.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "</s>", *byte_tokens])
    backend.train_from_iterator([*RESPONSES, *OBSERVATIONS, SYSTEM] * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>")
    tokenizer.chat_template = QWEN25_TEMPLATE
    return tokenizer


@pytest.mark.parametrize("kind", ["smollm2", "qwen2.5", "metaspace", "tiny"])
def test_incremental_spans_equal_the_spans_of_every_decoded_prefix(kind, smollm2_tokenizer):
    import random

    from agentenvs.train.tiny import build_tokenizer

    tokenizer = {
        "smollm2": lambda: smollm2_tokenizer,
        "qwen2.5": lambda: chatml_tokenizer(QWEN25_TEMPLATE),
        "metaspace": metaspace_tokenizer,
        "tiny": build_tokenizer,
    }[kind]()
    chat = ChatTokens(tokenizer)
    corpus = [sampled(tokenizer, text) for text in SPAN_CORPUS]
    rng = random.Random(0)  # sampled ids need not spell a text a tokenizer would produce: split characters too
    corpus += [[rng.randrange(len(tokenizer)) for _ in range(rng.randrange(1, 80))] for _ in range(40)]
    for ids in corpus:
        assert chat.char_spans(ids) == exact_spans(chat, ids), tokenizer.decode(ids)
        assert chat.char_spans(ids)[-1][1] == len(chat.response_text(ids))


def test_spans_fall_back_to_exact_decoding_for_a_decoder_that_is_not_local():
    class Shouting:
        """Decodes to upper case only once the whole text is longer than 10 characters."""

        chat_template = "x"
        eos_token_id = None

        def decode(self, ids, skip_special_tokens=False):
            text = "".join(chr(97 + i % 26) + ("é" if i % 3 == 0 else "") for i in ids)
            return text.upper() + "!" * (len(text) > 10) if len(ids) > 4 else text

    chat = ChatTokens(Shouting())
    ids = list(range(12))
    assert chat.char_spans(ids) == exact_spans(chat, ids)

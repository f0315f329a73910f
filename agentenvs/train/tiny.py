"""A tiny Llama built from scratch with a character tokenizer: a real model for CPU trainer tests.

Nothing is downloaded. The tokenizer maps every printable ASCII character to one id (plus special
tokens for the chat roles), so any observation of an agentenvs environment can be encoded. The chat
template is plain: ``<system>...<user>...<assistant>...</s>``; the end-of-sequence token closes every
assistant turn, which is where sampling stops. With the default sizes the model has about 3.3M
parameters (stack.md §3: TRL's GRPO runs at about 4 steps/s with it on two cores).
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
ROLES = ("<system>", "<user>", "<assistant>")
CHARS = string.digits + string.ascii_letters + string.punctuation + " \n\t"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<' + message['role'] + '>' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<assistant>' }}{% endif %}"
)


def build_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` with one id per character and single ids for the chat roles."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate((*SPECIALS, *ROLES, *CHARS))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=list(ROLES),
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(
    tokenizer: Any,
    *,
    hidden_size: int = 256,
    layers: int = 4,
    heads: int = 4,
    intermediate_size: int = 688,
    max_positions: int = 2048,
    seed: int = 0,
) -> Any:
    """A freshly initialised ``LlamaForCausalLM`` sized for ``tokenizer`` (weights from ``seed``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_checkpoint(path: str | Path, *, seed: int = 0, **sizes: Any) -> Path:
    """Build the tiny model and tokenizer and save both as a transformers checkpoint at ``path``."""
    path = Path(path)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed, **sizes)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path

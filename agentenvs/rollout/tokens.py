"""Token-in/token-out context building over a tokenizer's chat template.

Retokenization drift (AgentGym-RL decodes and re-encodes assistant turns; prime-rl #1334) happens
when a conversation is re-templated and re-encoded each turn: the ids a trainer sees differ from the
ids the model sampled. Here the context only ever grows by appending: the previous context, then the
ids the model sampled, then the template's ids for the next observation. Those template ids come from
rendering the template around a sentinel assistant message and keeping the text after it, tokenized on
its own (chat templates start that text with a special token or a newline after one, so nothing can
merge across the boundary). If the sampled ids already end with the end-of-turn token, the template's
copy of it is dropped.
"""

from __future__ import annotations

from typing import Any

from agentenvs.actions import ExtractedAction
from agentenvs.errors import InvalidArgument

SENTINEL = "\u2063agentenvs-sentinel\u2063"
REPLACEMENT = "\ufffd"
"""What a decoder gives for an incomplete UTF-8 character."""
DECODE_CONTEXT = 4
"""Ids decoded before an incremental window so it decodes as it does inside the whole text."""


class ChatTokens:
    """Builds prompts in token ids for one tokenizer and its chat template."""

    def __init__(self, tokenizer: Any, stop_token_ids: list[int] | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise InvalidArgument(
                "the tokenizer has no chat template; load one that has it (an instruct checkpoint) or set "
                "tokenizer.chat_template"
            )
        self.tokenizer = tokenizer
        ids = set(stop_token_ids or [])
        if tokenizer.eos_token_id is not None:
            ids.add(int(tokenizer.eos_token_id))
        self.stop_token_ids = sorted(ids)

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids of a whole conversation, ending with the assistant header."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def next_turn_ids(self, system: str | None, user: str, previous_response_ids: list[int]) -> list[int]:
        """The ids to append after a sampled response so the context ends with ``user``'s turn."""
        head = [{"role": "system", "content": system}] if system else []
        messages = [*head, {"role": "user", "content": "."}, {"role": "assistant", "content": SENTINEL}]
        text = self.render([*messages, {"role": "user", "content": user}], add_generation_prompt=True)
        at = text.find(SENTINEL)
        if at < 0:
            raise InvalidArgument("this chat template drops assistant messages; multi-turn needs one that keeps them")
        suffix = self.encode(text[at + len(SENTINEL) :])
        ended = bool(previous_response_ids) and previous_response_ids[-1] in self.stop_token_ids
        if ended and suffix and suffix[0] == previous_response_ids[-1]:
            suffix = suffix[1:]
        return suffix

    def response_text(self, response_ids: list[int]) -> str:
        """The text of sampled ids, without a trailing end-of-turn token."""
        return self.tokenizer.decode(self.strip_stop(response_ids), skip_special_tokens=False)

    def strip_stop(self, response_ids: list[int]) -> list[int]:
        if response_ids and response_ids[-1] in self.stop_token_ids:
            return list(response_ids[:-1])
        return list(response_ids)

    def char_spans(self, response_ids: list[int]) -> list[tuple[int, int]]:
        """Each sampled id's character span in :meth:`response_text` (an end-of-turn token gets an empty span).

        Token ``i`` ends where the text of ids ``0..i`` ends (never before the previous token's end: a
        partial UTF-8 character decodes to a replacement character that the next id completes). The text
        of ids ``0..i`` is measured incrementally, decoding only the ids since the last complete character
        and a few before them, so a turn costs time linear in its length instead of decoding every prefix.
        """
        body = self.strip_stop(response_ids)
        ends = self._prefix_lengths(body)
        if ends and ends[-1] != len(self.response_text(body)):  # a decoder that is not local: measure exactly
            ends = [len(self._decode(body[: i + 1])) for i in range(len(body))]
        spans = []
        previous = 0
        for end in ends:
            length = max(previous, end)
            spans.append((previous, length))
            previous = length
        spans += [(previous, previous)] * (len(response_ids) - len(body))
        return spans

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _prefix_lengths(self, body: list[int]) -> list[int]:
        """``len(decode(body[:i + 1]))`` for every ``i``, from windows after the last stable point (a prefix
        whose text ends in a complete character), each decoded with ``DECODE_CONTEXT`` ids before it so
        that merges and space clean-up at the boundary come out as in the whole text."""
        lengths = []
        stable_at = stable_length = head = 0
        for i in range(len(body)):
            start = max(0, stable_at - DECODE_CONTEXT)
            window = self._decode(body[start : i + 1])
            length = stable_length + len(window) - head
            lengths.append(length)
            if not window.endswith(REPLACEMENT):
                stable_at, stable_length = i + 1, length
                start = max(0, stable_at - DECODE_CONTEXT)
                head = len(self._decode(body[start:stable_at]))
        return lengths

    def action_mask(self, response_ids: list[int], action: ExtractedAction | None) -> list[int]:
        """1 on the sampled ids whose text overlaps the action's span."""
        if action is None:
            return [0] * len(response_ids)
        return [int(start < action.end and end > action.start) for start, end in self.char_spans(response_ids)]

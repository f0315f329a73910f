"""Prompts for LLM policies: the environment's instructions as system prompt, then the history.

The history is either the whole conversation (``full``: every observation and response, so each turn's
prompt extends the last one and token ids are built incrementally) or the last ``k`` turns
(``last_k``, as verl-agent does, which keeps prompts short on long episodes; the first observation,
which usually states the task, can be kept in front).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agentenvs.errors import InvalidArgument

HISTORY_MODES = ("full", "last_k")


@dataclass(frozen=True)
class HistoryConfig:
    """How much of the episode an LLM policy sees each turn."""

    mode: str = "full"
    k: int = 4
    """With ``last_k``: how many earlier (observation, response) turns stay in the prompt."""
    keep_first_observation: bool = True
    """With ``last_k``: keep the episode's first observation (the task) even when it falls out of the window."""

    def __post_init__(self) -> None:
        if self.mode not in HISTORY_MODES:
            raise InvalidArgument(f"history mode must be one of {HISTORY_MODES}, got {self.mode!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise InvalidArgument(f"history k must be a non-negative integer, got {self.k!r}")

    @classmethod
    def parse(cls, text: str) -> HistoryConfig:
        """``full`` or ``last:K`` (the CLI's ``--history``)."""
        if text == "full":
            return cls()
        mode, _, k = text.partition(":")
        if mode in ("last", "last_k") and k.isdigit():
            return cls(mode="last_k", k=int(k))
        raise InvalidArgument(f"--history must be 'full' or 'last:K' (for example last:4), got {text!r}")

    @property
    def incremental(self) -> bool:
        return self.mode == "full"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def system_prompt(description: dict[str, Any]) -> str:
    """The environment's instructions, or its action format when it gives none."""
    instructions = (description.get("instructions") or "").strip()
    if instructions:
        return instructions
    return f"You are playing a text environment. Answer with {description.get('action_format', 'an action')}."


class Conversation:
    """The observations and responses of one episode, rendered as chat messages."""

    def __init__(self, system: str, history: HistoryConfig):
        self.system = system
        self.history = history
        self.turns: list[tuple[str, str]] = []
        """Completed (observation, response) pairs."""

    def add(self, observation: str, response: str) -> None:
        self.turns.append((observation, response))

    def messages(self, observation: str) -> list[dict[str, str]]:
        """The prompt for answering ``observation`` after the completed turns."""
        turns = self.turns
        head: list[tuple[str, str]] = []
        if self.history.mode == "last_k":
            window = turns[len(turns) - self.history.k :] if self.history.k else []
            if self.history.keep_first_observation and turns and len(window) < len(turns):
                head = [turns[0]]
            turns = window
        messages = [{"role": "system", "content": self.system}]
        for seen, said in [*head, *turns]:
            messages += [{"role": "user", "content": seen}, {"role": "assistant", "content": said}]
        messages.append({"role": "user", "content": observation})
        return messages

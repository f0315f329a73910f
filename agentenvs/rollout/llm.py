"""What every language-model policy shares: prompting, per-turn seeds, and token records.

A backend (``TransformersPolicy``, ``OpenAIPolicy``) implements one or both of
``generate_ids(prompt_ids, seed, timeout_s)`` (token in, token out) and ``generate_chat(messages, seed,
timeout_s)`` (messages in; token ids out where the server returns them). ``LLMActor`` turns
observations into prompts, calls the backend and keeps the episode's ``TokenRecord``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agentenvs.errors import AgentEnvsError
from agentenvs.rollout.policy import Actor, Decision, EpisodeContext, Policy
from agentenvs.rollout.prompting import Conversation, HistoryConfig, system_prompt
from agentenvs.rollout.records import TokenRecord
from agentenvs.rollout.tokens import ChatTokens
from agentenvs.seeding import derive_seed


class PolicyError(AgentEnvsError, RuntimeError):
    """The model could not answer (the prompt outgrew its context, a malformed server answer)."""

    code = "policy_error"
    http_status = 500


class InfraError(AgentEnvsError, RuntimeError):
    """The model server could not be reached or kept failing after retries."""

    code = "infra_error"
    http_status = 502


@dataclass
class Generation:
    """One sampled completion."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_ids: list[int] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class Sampling:
    """Sampling settings shared by the model policies."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 128
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
        }


class LLMPolicy(Policy):
    """Base class of model policies: ``chat`` is set for backends that take token ids."""

    chat: ChatTokens | None = None
    tokens_in: bool = True
    model_name: str = ""
    logprob_kind: str = "raw"
    """What the backend's logprobs are of (``TokenRecord.logprob_kind``)."""

    def __init__(self, sampling: Sampling, history: HistoryConfig, seed: int):
        self.sampling_settings = sampling
        self.history = history
        self.seed = int(seed)

    @property
    def sampling(self) -> dict[str, Any]:
        return self.sampling_settings.to_dict()

    def describe(self) -> dict[str, Any]:
        """The model and the prompting; a backend adds its own settings (and its ``identity`` keeps
        only what changes behaviour, not a device or batch size, which only change rounding)."""
        return {"name": self.name, "model": self.model_name, "seed": self.seed, "history": self.history.to_dict()}

    def begin(self, context: EpisodeContext) -> Actor:
        return LLMActor(self, context)

    def generate_ids(self, prompt_ids: list[int], seed: int, timeout_s: float | None) -> Generation:
        raise PolicyError(f"{type(self).__name__} does not take token-id prompts; use its chat mode")

    def generate_chat(self, messages: list[dict[str, str]], seed: int, timeout_s: float | None) -> Generation:
        raise PolicyError(f"{type(self).__name__} does not take chat messages")


class LLMActor(Actor):
    """One episode of a model policy: the conversation, the growing token context, the record."""

    def __init__(self, policy: LLMPolicy, context: EpisodeContext):
        self.policy = policy
        self.context = context
        self.system = system_prompt(context.description)
        self.conversation = Conversation(self.system, policy.history)
        self.record: TokenRecord | None = None
        if policy.chat is not None:
            self.record = TokenRecord(incremental=policy.tokens_in and policy.history.incremental)
            self.record.tokenizer = policy.model_name
            self.record.logprob_kind = policy.logprob_kind
        self.context_ids: list[int] | None = None
        self.last_response_ids: list[int] = []
        self.deadline: float | None = None

    def set_deadline(self, deadline: float | None) -> None:
        """A monotonic-clock deadline; each request's timeout is cut to what remains."""
        self.deadline = deadline

    def _timeout(self) -> float | None:
        return None if self.deadline is None else max(0.1, self.deadline - time.monotonic())

    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        turn = len(self.conversation.turns)
        seed = derive_seed(self.context.policy_seed, "turn", turn) % (2**31)
        decision = self._act_tokens(observation, seed) if self.policy.tokens_in else self._act_chat(observation, seed)
        self.conversation.add(observation, decision.response)
        return decision

    def _act_tokens(self, observation: str, seed: int) -> Decision:
        chat = self.policy.chat
        assert chat is not None and self.record is not None
        if self.record.incremental and self.context_ids is not None:
            added = chat.next_turn_ids(self.system, observation, self.last_response_ids)
            prompt = self.context_ids + added
        else:
            prompt = chat.prompt_ids(self.conversation.messages(observation))
            added = prompt
        generation = self.policy.generate_ids(prompt, seed, self._timeout())
        ids = generation.token_ids or []
        response = chat.response_text(ids)
        action = self.context.extract_action(response)
        self.record.add_turn(added, ids, _logprobs(generation, ids), chat.action_mask(ids, action))
        self.context_ids = prompt + ids
        self.last_response_ids = ids
        return Decision(response, action, _usage(prompt, ids, generation))

    def _act_chat(self, observation: str, seed: int) -> Decision:
        messages = self.conversation.messages(observation)
        generation = self.policy.generate_chat(messages, seed, self._timeout())
        response = generation.text
        action = self.context.extract_action(response)
        chat = self.policy.chat
        if self.record is not None and chat is not None and generation.token_ids is not None and generation.prompt_ids:
            ids = generation.token_ids
            self.record.add_turn(generation.prompt_ids, ids, _logprobs(generation, ids), chat.action_mask(ids, action))
        else:
            self.record = None
        return Decision(response, action, _usage(generation.prompt_ids or [], generation.token_ids or [], generation))

    def tokens(self) -> TokenRecord | None:
        return self.record


def _logprobs(generation: Generation, ids: list[int]) -> list[float] | None:
    """The sampled ids' logprobs, or None when the backend gave none (or not one per id)."""
    values = generation.logprobs
    return list(values) if values is not None and len(values) == len(ids) else None


def _usage(prompt: list[int], ids: list[int], generation: Generation) -> dict[str, Any]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "finish_reason": generation.finish_reason}

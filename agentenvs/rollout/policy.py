"""The policy protocol: one shared ``Policy``, one ``Actor`` per episode, one ``Decision`` per turn.

A policy object is shared by every episode the driver runs (from many threads), so per-episode state
(the conversation, the token ids so far, the sampling stream) lives in the ``Actor`` that
``Policy.begin`` returns. The actor finds the action in its own response with the environment's
``extract_action`` (given in the context), so it can mark the action's tokens.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentenvs.actions import ExtractedAction
from agentenvs.rollout.records import TokenRecord


@dataclass(frozen=True)
class EpisodeContext:
    """What a policy may know about the episode it is about to play."""

    env: str
    description: dict[str, Any]
    """The environment's ``describe()``: instructions (the system prompt), action format, limits."""
    task_id: str
    split: str
    seed: int
    group_id: str
    episode_id: str
    member: int
    """Index of this rollout within its group (0..G-1)."""
    policy_seed: int
    """The seed of this episode's sampling stream: differs between group members, fixed across runs."""
    extract_action: Callable[[str], ExtractedAction | None]


@dataclass
class Decision:
    """A policy's answer for one turn."""

    response: str
    """The full model output (reasoning and action)."""
    action: ExtractedAction | None
    """The action found in ``response`` and its span; None when there is no parsable action."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Optional counters (prompt and completion tokens, finish reason)."""


class Actor(ABC):
    """Plays one episode for its policy."""

    @abstractmethod
    def act(self, observation: str, info: dict[str, Any]) -> Decision:
        """Answer the current observation (``info`` carries ``admissible_actions``, ``privileged``...)."""

    def tokens(self) -> TokenRecord | None:
        """The episode's token ids, logprobs and masks; None for policies that do not work in tokens."""
        return None


class Policy(ABC):
    """A way of choosing actions, shared across episodes and threads."""

    name: str = "policy"
    needs_privileged: bool = False
    """True when the policy reads ``info['privileged']`` (the env must be made with privileged=True)."""
    blocking: bool = True
    """True when ``act`` waits on something (a model server): the driver gives each episode a thread.
    A policy that answers at once sets False, and on servers the driver then steps all ready episodes of
    a server in one batch call per round (``RolloutConfig.schedule``)."""

    @property
    def sampling(self) -> dict[str, Any]:
        """Sampling settings for the records (temperature, top_p, max_tokens, ...)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """The ``policy`` field of the records: ``name`` and the settings that shape behaviour."""
        return {"name": self.name}

    def identity(self) -> dict[str, Any]:
        """What fixes the policy's behaviour, for telling runs apart: a run resumes only episodes
        played by a policy of the same identity (docs/evaluation.md, "Resuming")."""
        return self.describe()

    @abstractmethod
    def begin(self, context: EpisodeContext) -> Actor:
        """A fresh actor for one episode."""

    def close(self) -> None:
        """Release what the policy holds (HTTP sessions, worker threads); nothing by default."""
        return None

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def whole_response_action(response: str) -> ExtractedAction | None:
    """A scripted policy's response is its action: the span covers all of it."""
    return ExtractedAction(response, 0, len(response)) if response else None

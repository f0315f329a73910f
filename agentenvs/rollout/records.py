"""Episode records (docs/rollout.md): one JSON object per line, the only thing scorers and trainers read.

``EpisodeRecord`` holds an episode's identity (env, version, panel hash, task, seed, group), the policy
and sampling settings, every step, the outcome, timings, and where a model acted, a ``TokenRecord``.

Token layout (``tokens``), per turn ``t``:

- ``prompt_ids[t]``: with ``incremental`` True (full history), only the ids *added* to the context
  before turn ``t`` (the templated observation and the assistant header); the model's input at turn
  ``t`` is every earlier ``prompt_ids`` and ``response_ids`` concatenated, then ``prompt_ids[t]``.
  With ``incremental`` False (windowed history, chat-mode servers), the complete prompt of turn ``t``.
- ``response_ids[t]``: the ids the policy sampled, exactly as sampled (never decoded and re-encoded).
- ``response_logprobs[t]``: the log-probability of each sampled id (see ``logprob_kind``), or None
  when the backend returned none (never a made-up 0.0: a consumer reading behaviour logprobs must know).
- ``loss_mask[t]`` and ``action_mask[t]``: aligned with ``prompt_ids[t] + response_ids[t]``. The loss
  mask is 1 on ids the policy generated (0 on prompt and template ids); the action mask is 1 on the
  response ids that overlap the action span that ``extract_action`` found.

``TokenRecord.turn_sample(t)`` and ``TokenRecord.sequence()`` give trainers these in ready form.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.info import FAILURE_CAUSES

SCHEMA = "agentenvs.episode/2"
"""The schema records are written in. ``/2`` added ``StepRecord.anchor`` and ``None`` logprobs."""

READABLE_SCHEMAS = ("agentenvs.episode/1", SCHEMA)
"""Schemas :meth:`EpisodeRecord.from_dict` reads; a ``/1`` record keeps its schema, so consumers that need
what ``/2`` added (GiGPO needs ``StepRecord.anchor``) can refuse it."""

STEP_INFO_KEYS = (
    "action_valid",
    "anchor",
    "state_hash",
    "milestones",
    "metrics",
    "score",
    "raw_score",
    "success",
    "end_reason",
    "reward_pending",
    "resolution_id",
)
"""The info keys a step record keeps; ``admissible_actions`` and ``privileged`` are left out."""


def step_info(info: dict[str, Any]) -> dict[str, Any]:
    """The subset of an environment's info that goes into a step record."""
    return {key: info[key] for key in STEP_INFO_KEYS if key in info}


@dataclass
class StepRecord:
    """One turn: what the policy saw, what it said, what the environment made of it.

    ``observation`` and ``anchor`` describe the state the action was taken in (the reset's for turn 1);
    ``reward``, ``terminated``, ``truncated`` and ``info`` are the transition's outcome, so
    ``info["anchor"]`` names the state the action *reached*. Step-level credit (GiGPO's step groups)
    groups actions by ``anchor``, the state they were chosen in.
    """

    turn: int
    observation: str
    response: str
    action: str
    action_span: list[int] | None
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    anchor: str | None = None
    """The anchor of the state the action was taken in; None when the environment gives no anchors."""


@dataclass
class TurnSample:
    """One turn as a training sample: the whole prompt the model saw and what it sampled."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float] | None
    """None when the backend returned no logprobs."""
    action_mask: list[int]
    """Aligned with ``response_ids``."""


@dataclass
class TokenSequence:
    """A full-history episode as one sequence; masks and logprobs are aligned with ``ids``."""

    ids: list[int]
    loss_mask: list[int]
    action_mask: list[int]
    logprobs: list[float] | None
    """The sampled logprob where ``loss_mask`` is 1, and 0.0 elsewhere; None when a turn has none."""


@dataclass
class TokenRecord:
    """Token ids, sampled logprobs and masks of an episode, one list entry per turn."""

    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    response_logprobs: list[list[float] | None] = field(default_factory=list)
    loss_mask: list[list[int]] = field(default_factory=list)
    action_mask: list[list[int]] = field(default_factory=list)
    incremental: bool = True
    """True: ``prompt_ids[t]`` holds only the ids added since turn ``t-1``; False: the whole prompt."""
    logprob_kind: str = "raw"
    """``raw``: log-softmax of the model's unscaled logits (vLLM's default, llama.cpp's); ``processed``: of
    the distribution sampled from, after temperature (``TransformersPolicy``'s, vLLM's with
    ``--logprobs-mode processed_logprobs``). The two agree at temperature 1."""
    tokenizer: str | None = None
    """What produced the ids (a checkpoint path or model name), so a trainer can check it matches."""

    def add_turn(
        self,
        prompt_ids: list[int],
        response_ids: list[int],
        logprobs: list[float] | None,
        response_action_mask: list[int],
    ) -> None:
        """Append a turn; ``response_action_mask`` is aligned with ``response_ids``; ``logprobs`` None when
        the backend returned none."""
        n_logprobs = len(response_ids) if logprobs is None else len(logprobs)
        if not (len(response_ids) == n_logprobs == len(response_action_mask)):
            raise InvalidArgument(
                f"a turn needs one logprob and one action-mask bit per response id; got {len(response_ids)} ids, "
                f"{n_logprobs} logprobs, {len(response_action_mask)} mask bits"
            )
        self.prompt_ids.append(list(prompt_ids))
        self.response_ids.append(list(response_ids))
        self.response_logprobs.append(None if logprobs is None else [float(x) for x in logprobs])
        self.loss_mask.append([0] * len(prompt_ids) + [1] * len(response_ids))
        self.action_mask.append([0] * len(prompt_ids) + [int(bool(b)) for b in response_action_mask])

    @property
    def num_turns(self) -> int:
        return len(self.response_ids)

    def context_ids(self, turn: int) -> list[int]:
        """The complete input of the model at ``turn``."""
        if not self.incremental:
            return list(self.prompt_ids[turn])
        ids: list[int] = []
        for t in range(turn):
            ids += self.prompt_ids[t] + self.response_ids[t]
        return ids + self.prompt_ids[turn]

    def turn_sample(self, turn: int) -> TurnSample:
        """Turn ``turn`` as a (prompt, response) training sample."""
        skip = len(self.prompt_ids[turn])
        return TurnSample(
            prompt_ids=self.context_ids(turn),
            response_ids=list(self.response_ids[turn]),
            response_logprobs=None if self.response_logprobs[turn] is None else list(self.response_logprobs[turn]),
            action_mask=list(self.action_mask[turn][skip:]),
        )

    def sequence(self) -> TokenSequence:
        """The whole conversation as one sequence with its masks; needs ``incremental`` (full history)."""
        if not self.incremental:
            raise InvalidArgument(
                "this episode was rolled out with a windowed history (or a chat-mode server), so its turns do not "
                "share one sequence; train on turn_sample(t) for each turn instead"
            )
        ids: list[int] = []
        loss: list[int] = []
        action: list[int] = []
        logprobs: list[float] = []
        for t in range(self.num_turns):
            ids += self.prompt_ids[t] + self.response_ids[t]
            loss += self.loss_mask[t]
            action += self.action_mask[t]
            logprobs += [0.0] * len(self.prompt_ids[t]) + (self.response_logprobs[t] or [])
        known = all(values is not None for values in self.response_logprobs)
        return TokenSequence(ids=ids, loss_mask=loss, action_mask=action, logprobs=logprobs if known else None)

    def check(self) -> list[str]:
        """Problems with the lengths of the per-turn lists; empty when they line up."""
        problems = []
        lists = (self.prompt_ids, self.response_ids, self.response_logprobs, self.loss_mask, self.action_mask)
        if len({len(x) for x in lists}) != 1:
            problems.append(f"per-turn lists differ in length: {[len(x) for x in lists]}")
            return problems
        for t in range(self.num_turns):
            total = len(self.prompt_ids[t]) + len(self.response_ids[t])
            n_ids = len(self.response_ids[t])
            n_logprobs = n_ids if self.response_logprobs[t] is None else len(self.response_logprobs[t])
            if n_logprobs != n_ids:
                problems.append(f"turn {t}: {n_logprobs} logprobs for {n_ids} ids")
            for name in ("loss_mask", "action_mask"):
                if len(getattr(self, name)[t]) != total:
                    problems.append(f"turn {t}: {name} has {len(getattr(self, name)[t])} entries, expected {total}")
        return problems


@dataclass
class EpisodeRecord:
    """One episode, as docs/rollout.md defines it (schema ``agentenvs.episode/2``)."""

    episode_id: str
    group_id: str
    env: str
    env_version: str
    split: str
    panel_hash: str
    task_id: str
    task_type: str | None
    seed: int
    policy: dict[str, Any]
    sampling: dict[str, Any]
    steps: list[StepRecord] = field(default_factory=list)
    final_observation: str = ""
    return_: float = 0.0
    success: bool = False
    score: float = 0.0
    end_reason: str = "error"
    success_turn: int | None = None
    num_turns: int = 0
    failure_cause: str = "none"
    error: str | None = None
    timings: dict[str, float] = field(default_factory=lambda: {"total_s": 0.0, "env_s": 0.0, "policy_s": 0.0})
    started_at: str = ""
    tokens: TokenRecord | None = None
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["return"] = data.pop("return_")
        data["steps"] = [asdict(s) for s in self.steps]
        data["tokens"] = None if self.tokens is None else asdict(self.tokens)
        return data

    def to_json(self) -> str:
        """One line of JSON (no newline inside)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        if not isinstance(data, dict):
            raise InvalidArgument(f"an episode record is a JSON object, got {type(data).__name__}")
        if data.get("schema") not in READABLE_SCHEMAS:
            raise InvalidArgument(
                f"not an {SCHEMA} record (schema={data.get('schema')!r}); re-run `agentenvs rollout` to regenerate it"
            )
        data = dict(data)
        data["return_"] = data.pop("return", 0.0)
        known = {f.name for f in fields(cls)}
        missing = {"episode_id", "group_id", "env", "env_version", "split", "panel_hash", "task_id", "seed"} - set(data)
        if missing:
            raise InvalidArgument(f"episode record lacks the fields {sorted(missing)}")
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.setdefault("task_type", None)
        kwargs.setdefault("policy", {})
        kwargs.setdefault("sampling", {})
        kwargs["steps"] = [StepRecord(**s) for s in data.get("steps", [])]
        kwargs["tokens"] = None if data.get("tokens") is None else TokenRecord(**data["tokens"])
        record = cls(**kwargs)
        if record.failure_cause not in FAILURE_CAUSES:
            raise InvalidArgument(f"failure_cause {record.failure_cause!r} is not one of {FAILURE_CAUSES}")
        return record

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> EpisodeRecord:
        """Parse one record from a JSON line (or an already-decoded dict)."""
        return cls.from_dict(text if isinstance(text, dict) else json.loads(text))

    @property
    def reward_pending(self) -> bool:
        """True while the episode's reward waits on something outside it (a forecast's resolution): its
        recorded reward is a placeholder until a replay backfills it (``agentenvs.train.replay``)."""
        return any(bool(s.info.get("reward_pending")) for s in self.steps[-1:])

    @property
    def usable_for_training(self) -> bool:
        """False for rollouts that infrastructure broke (``infra``, ``timeout``): trainers drop them."""
        return self.failure_cause not in ("infra", "timeout")

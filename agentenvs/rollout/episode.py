"""One episode in play: reset, then decide and step turn by turn, then its record.

The steps are separate methods so that two schedulers can play the same episodes: a thread per episode
(:func:`rollout_episode`, for policies that wait on a model) and rounds that step many episodes' sessions
in one batch call (``agentenvs.rollout.rounds``, for policies that answer at once). Both give the same
records; every failure ends up labelled in the record (``infra``, ``timeout``, ``policy``), never raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from agentenvs import panels
from agentenvs.errors import AgentEnvsError
from agentenvs.protocol import Reset
from agentenvs.rollout.llm import InfraError, PolicyError
from agentenvs.rollout.policy import EpisodeContext, Policy
from agentenvs.rollout.records import EpisodeRecord, StepRecord, step_info
from agentenvs.seeding import derive_seed

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


class EpisodeTimeout(AgentEnvsError, TimeoutError):
    """The episode ran past its time limit."""

    code = "episode_timeout"
    http_status = 504


class _PolicyFailure(Exception):
    def __init__(self, cause: str):
        self.cause = cause


class _EnvCallFailed(Exception):
    """An environment call made from inside the policy (``extract_action`` on a server) failed: infra."""


@dataclass
class Pending:
    """An action the policy chose, waiting to be stepped."""

    action: str
    response: str
    span: list[int] | None


class EpisodePlay:
    """The state of one planned episode between its turns."""

    def __init__(self, source: Any, policy: Policy, spec: Any, description: dict[str, Any], identity: dict[str, Any]):
        self.source, self.policy, self.spec, self.description = source, policy, spec, description
        self.record = new_record(spec, policy, identity)
        self.identity = identity
        self.started = time.monotonic()
        self.timings = {"total_s": 0.0, "env_s": 0.0, "policy_s": 0.0}
        self.env: Any = None
        self.actor: Any = None
        self.observation = ""
        self.info: dict[str, Any] = {}
        self.deadline: float | None = None
        self.time_limit_s: float | None = None
        self.healthy = False
        self.max_chars = int(description.get("max_action_chars", 4096))

    def start(self, time_limit_s: float | None) -> None:
        """Take an environment, reset it to the episode's task and seed, and begin the policy's actor."""
        self.take(time_limit_s)
        reset = self.reset_request()
        tick = time.monotonic()
        result = self.env.reset(seed=reset.seed, options=reset.options)
        self.begin(result, time.monotonic() - tick)

    def take(self, time_limit_s: float | None) -> None:
        """Take an environment for the episode."""
        self.use(self.source.take(), time_limit_s)

    def use(self, env: Any, time_limit_s: float | None) -> None:
        """Play the episode on ``env`` (its clock runs from the episode's creation)."""
        self.time_limit_s = time_limit_s
        self.deadline = None if time_limit_s is None else self.started + time_limit_s
        self.env = env

    def reset_request(self) -> Reset:
        """The reset that starts this episode: its seed, split and task."""
        spec = self.spec
        options = {"split": spec.split} | ({"task_id": spec.task_id} if spec.task_id else {})
        return Reset(seed=spec.seed, options=options)

    def begin(self, reset_result: tuple[str, dict[str, Any]], env_s: float) -> None:
        """Take in the reset's observation and begin the policy's actor."""
        self.observation, self.info = reset_result
        self.timings["env_s"] += env_s
        self.record.task_id = self.info.get("task_id", self.record.task_id)
        self.record.task_type = self.info.get("task_type")
        self.actor = _begin(self.policy, self.env, self.spec, self.record.task_id, self.description, self.identity)
        if hasattr(self.actor, "set_deadline"):
            self.actor.set_deadline(self.deadline)

    def decide(self) -> Pending:
        """The policy's next action (``""`` for a response without a usable one)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise EpisodeTimeout(f"the episode ran past its time limit of {self.time_limit_s:g} s")
        tick = time.monotonic()
        decision = _act(self.actor, self.observation, self.info)
        self.timings["policy_s"] += time.monotonic() - tick
        found = decision.action if decision.action and len(decision.action.action) <= self.max_chars else None
        span = [found.start, found.end] if found else None
        return Pending(found.action if found else "", decision.response, span)

    def accept(self, pending: Pending, result: StepResult, env_s: float) -> bool:
        """Record the step's outcome; True when the episode has ended.

        The step keeps the state the action was taken in (observation and anchor, from before the step)
        beside the transition's outcome (reward, flags and info, from after it)."""
        anchor = self.info.get("anchor")
        next_observation, reward, terminated, truncated, self.info = result
        self.timings["env_s"] += env_s
        self.record.steps.append(
            StepRecord(
                turn=len(self.record.steps) + 1,
                observation=self.observation,
                response=pending.response,
                action=pending.action,
                action_span=pending.span,
                reward=float(reward),
                terminated=bool(terminated),
                truncated=bool(truncated),
                info=step_info(self.info),
                anchor=None if anchor is None else str(anchor),
            )
        )
        self.observation = self.record.final_observation = next_observation
        if terminated or truncated:
            self.healthy = True
            finish(self.record)
            return True
        return False

    def fail(self, exc: BaseException) -> None:
        """Label the record by what went wrong."""
        if isinstance(exc, _PolicyFailure):
            self.healthy = True
            _fail(self.record, exc.cause, exc.__cause__)
        elif isinstance(exc, (EpisodeTimeout, TimeoutError)):
            _fail(self.record, "timeout", exc)
        else:  # the environment or its server failed
            _fail(self.record, "infra", exc)

    def end(self) -> EpisodeRecord:
        """Close the record and give the environment back (a broken or timed-out one is discarded)."""
        record = self.record
        if self.actor is not None:
            record.tokens = self.actor.tokens()
        record.num_turns = len(record.steps)
        record.return_ = float(sum(s.reward for s in record.steps))
        self.timings["total_s"] = time.monotonic() - self.started
        record.timings = self.timings
        if self.env is not None:
            reuse = self.healthy and record.failure_cause != "timeout"
            (self.source.give_back if reuse else self.source.discard)(self.env)
        return record


def rollout_episode(
    source: Any, policy: Policy, spec: Any, description: dict[str, Any], identity: dict[str, Any], config: Any
) -> EpisodeRecord:
    """Play one episode in the calling thread; every failure ends up in the record, never as an exception."""
    play = EpisodePlay(source, policy, spec, description, identity)
    try:
        play.start(config.time_limit_s)
        while True:
            pending = play.decide()
            tick = time.monotonic()
            result = play.env.step(pending.action)
            if play.accept(pending, result, time.monotonic() - tick):
                break
    except Exception as exc:
        play.fail(exc)
    return play.end()


def new_record(spec: Any, policy: Policy, identity: dict[str, Any]) -> EpisodeRecord:
    """The record of an episode about to start (an ``error`` until it ends otherwise)."""
    return EpisodeRecord(
        episode_id=spec.episode_id,
        group_id=spec.group_id,
        env=identity["env"],
        env_version=identity["env_version"],
        split=spec.split,
        panel_hash=run_panel_hash(identity, spec.split),
        task_id=spec.task_id or "",
        task_type=None,
        seed=spec.seed,
        policy=policy.describe(),
        sampling=policy.sampling,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def run_panel_hash(identity: dict[str, Any], split: str) -> str:
    """The split's panel hash, read once per run (``identity`` is the run's; the panel does not change
    during a run, and reading it costs a file read per episode)."""
    hashes = identity.setdefault("panel_hashes", {})
    if split not in hashes:
        hashes[split] = panel_hash(identity["env"], split)
    return hashes[split]


def panel_hash(env: str, split: str) -> str:
    try:
        return panels.panel_hash(env, split)
    except AgentEnvsError:
        return ""


def _begin(
    policy: Policy, env: Any, spec: Any, task_id: str, description: dict[str, Any], identity: dict[str, Any]
) -> Any:
    """The policy's actor for this episode, told the episode's context."""
    context = EpisodeContext(
        env=identity["env"],
        description=description,
        task_id=task_id,
        split=spec.split,
        seed=spec.seed,
        group_id=spec.group_id,
        episode_id=spec.episode_id,
        member=spec.member,
        policy_seed=derive_seed("policy", getattr(policy, "seed", 0), spec.episode_id),
        extract_action=_guarded(env.extract_action),
    )
    return policy.begin(context)


def _guarded(extract: Callable[[str], Any]) -> Callable[[str], Any]:
    def extract_action(response: str) -> Any:
        try:
            return extract(response)
        except Exception as exc:
            raise _EnvCallFailed(f"{type(exc).__name__}: {exc}") from exc

    return extract_action


def _act(actor: Any, observation: str, info: dict[str, Any]) -> Any:
    """The actor's decision, with its failures labelled (policy, infra, timeout)."""
    try:
        return actor.act(observation, info)
    except (EpisodeTimeout, TimeoutError):
        raise
    except InfraError as exc:
        raise _PolicyFailure("infra") from exc
    except (PolicyError, AgentEnvsError, ValueError, KeyError) as exc:
        raise _PolicyFailure("policy") from exc


def finish(record: EpisodeRecord) -> None:
    """Set an ended episode's outcome (success, score, end reason, failure cause) from its last step."""
    last = record.steps[-1].info if record.steps else {}
    record.success = bool(last.get("success", False))
    record.score = float(last.get("score", 1.0 if record.success else 0.0))
    record.end_reason = str(last.get("end_reason", "failure"))
    record.success_turn = next((s.turn for s in record.steps if s.info.get("success")), None)
    if record.success or last.get("reward_pending"):  # a pending outcome has not failed (yet)
        record.failure_cause = "none"
    elif any(s.action_span is None for s in record.steps):
        record.failure_cause = "parse"
    else:
        record.failure_cause = "policy"


def _fail(record: EpisodeRecord, cause: str, exc: BaseException | None) -> None:
    record.failure_cause = cause
    record.end_reason = "error"
    record.success = False
    record.score = 0.0
    record.error = f"{type(exc).__name__}: {exc}" if exc is not None else cause

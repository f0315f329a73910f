"""Play episodes in rounds: every ready session of a server is stepped in one batch call.

For policies that answer at once (scripted, random, expert), a thread per episode spends more time
handing the interpreter between threads than stepping: one round-trip per step and a thread wake per
answer. Here one thread asks every active episode's actor for its action, steps them all with the
pool's ``step_many`` (one call per server) and records the answers. Episodes that end are replaced by
new ones, whose resets go in the same batch call (a ``Reset`` in place of an action), so starting an
episode costs no round-trip of its own.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentenvs.rollout.collector import full_collections_held
from agentenvs.rollout.episode import EpisodePlay, Pending
from agentenvs.rollout.policy import Policy
from agentenvs.rollout.records import EpisodeRecord

LANES = 2
"""Batch calls in flight at once: the driver's own work on one lane overlaps the servers' on the other."""


def can_play_in_rounds(policy: Policy, servers: Any) -> bool:
    """Rounds need a pool that steps many sessions at once and a policy that does not wait on a model."""
    return servers is not None and hasattr(servers, "step_many") and not policy.blocking


@dataclass
class _Call:
    """What one lane's batch call carried and what came back."""

    decided: list[tuple[EpisodePlay, Pending]]
    starting: list[EpisodePlay]
    started: list[EpisodePlay] = field(default_factory=list)
    """The starting episodes that got an environment (the others failed to take one, in ``failures``)."""
    failures: list[tuple[EpisodePlay, BaseException]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    """The step results of ``decided``, then the reset results of ``started``."""
    env_s: float = 0.0


class _Lane:
    """A share of the episodes in play whose batch call is on the wire while the driver works on the others."""

    def __init__(self) -> None:
        self.active: list[EpisodePlay] = []
        self.starting: list[EpisodePlay] = []
        self.call: Future[_Call] | None = None
        self.in_call = 0
        """Episodes in the call on the wire."""

    @property
    def in_play(self) -> int:
        return len(self.active) + len(self.starting) + self.in_call


def play_in_rounds(
    todo: Sequence[Any], policy: Policy, source: Any, description: dict[str, Any], identity: dict[str, Any], config: Any
) -> Iterator[EpisodeRecord]:
    """Yield records as episodes finish, ``config.concurrency`` of them in play at once.

    The episodes in play are split in ``LANES`` lanes: while one lane's batch is being stepped on the
    servers, the driver records the other lane's answers and asks its actors for their next actions.
    Full garbage collections wait for the run's end (``collector.py``): each stopped both lanes.
    """
    queue = deque(todo)
    lanes = [_Lane() for _ in range(LANES)]
    limit = max(1, config.concurrency)
    with full_collections_held(), ThreadPoolExecutor(LANES, thread_name_prefix="rollout-rounds") as executor:
        while queue or any(lane.in_play for lane in lanes):
            for lane in lanes:
                if lane.call is not None:
                    yield from _settle_lane(lane, lane.call.result())
                while queue and sum(other.in_play for other in lanes) < limit:  # new episodes even out the lanes
                    emptiest = min(lanes, key=lambda other: other.in_play)
                    emptiest.starting.append(EpisodePlay(source, policy, queue.popleft(), description, identity))
                call = _Call(decided=[], starting=lane.starting)
                lane.starting = []
                yield from _decide_lane(lane, call.decided)
                if call.decided or call.starting:
                    lane.call = executor.submit(_step_lane, source, call, config.time_limit_s)
                    lane.in_call = len(call.decided) + len(call.starting)


def _decide_lane(lane: _Lane, decided: list[tuple[EpisodePlay, Pending]]) -> Iterator[EpisodeRecord]:
    """Ask every active episode of the lane for its next action; those whose policy fails end here."""
    active, lane.active = lane.active, []
    for play in active:
        try:
            decided.append((play, play.decide()))
        except Exception as exc:
            play.fail(exc)
            yield play.end()


def _step_lane(source: Any, call: _Call, time_limit_s: float | None) -> _Call:
    """Take environments for the starting episodes, then one ``step_many`` (one call per server) with the
    lane's steps and those episodes' resets."""
    tick = time.monotonic()
    for play, env in zip(call.starting, source.take_many(len(call.starting)), strict=True):
        if isinstance(env, BaseException):
            call.failures.append((play, env))
        else:
            play.use(env, time_limit_s)
            call.started.append(play)
    envs = [play.env for play, _ in call.decided] + [play.env for play in call.started]
    actions = [pending.action for _, pending in call.decided] + [play.reset_request() for play in call.started]
    try:
        call.results = source.servers.step_many(envs, actions) if envs else []
    except Exception as exc:  # the pool failed as a whole: every episode of the call fails with it
        call.results = [exc] * len(envs)
    call.env_s = time.monotonic() - tick
    return call


def _settle_lane(lane: _Lane, call: _Call) -> Iterator[EpisodeRecord]:
    """Record the lane's answers; the episodes that go on (or have just begun) are active in the lane."""
    lane.call, lane.in_call = None, 0
    for play, failure in call.failures:
        play.fail(failure)
        yield play.end()
    steps, resets = call.results[: len(call.decided)], call.results[len(call.decided) :]
    for (play, pending), result in zip(call.decided, steps, strict=True):
        if isinstance(result, BaseException):
            play.fail(result)
            yield play.end()
        elif play.accept(pending, result, call.env_s):  # each episode waited for the whole call
            yield play.end()
        else:
            lane.active.append(play)
    for play, result in zip(call.started, resets, strict=True):
        try:
            if isinstance(result, BaseException):
                raise result
            play.begin(result, call.env_s)
        except Exception as exc:
            play.fail(exc)
            yield play.end()
        else:
            lane.active.append(play)

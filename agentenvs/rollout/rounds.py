"""Play episodes in rounds: every ready session of a server is stepped in one batch call.

For policies that answer at once (scripted, random, expert), a thread per episode spends more time
handing the interpreter between threads than stepping: one round-trip per step and a thread wake per
answer. Here one thread asks every active episode's actor for its action, steps them all with the
pool's ``step_many`` (one call per server) and records the answers; episodes that end are replaced by
new ones, whose resets run on a few threads meanwhile so no round waits on them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from agentenvs.rollout.episode import EpisodePlay, Pending
from agentenvs.rollout.policy import Policy
from agentenvs.rollout.records import EpisodeRecord

RESET_THREADS = 4
"""Resets of starting episodes in flight at once, beside the rounds."""
LANES = 2
"""Batch calls in flight at once: the driver's own work on one lane overlaps the servers' on the other."""


def can_play_in_rounds(policy: Policy, servers: Any) -> bool:
    """Rounds need a pool that steps many sessions at once and a policy that does not wait on a model."""
    return servers is not None and hasattr(servers, "step_many") and not policy.blocking


class _Lane:
    """A share of the active episodes whose batch call is on the wire while the driver works on the others."""

    def __init__(self) -> None:
        self.active: list[EpisodePlay] = []
        self.decided: list[tuple[EpisodePlay, Pending]] = []
        self.call: Future[tuple[list[Any], float]] | None = None


def play_in_rounds(
    todo: Sequence[Any], policy: Policy, source: Any, description: dict[str, Any], identity: dict[str, Any], config: Any
) -> Iterator[EpisodeRecord]:
    """Yield records as episodes finish, ``config.concurrency`` of them in play at once.

    The active episodes are split in ``LANES`` lanes: while one lane's batch is being stepped on the
    servers, the driver records the other lane's answers and asks its actors for their next actions.
    """
    queue = deque(todo)
    lanes = [_Lane() for _ in range(LANES)]
    starting: set[Future[tuple[EpisodePlay, BaseException | None]]] = set()
    limit = max(1, config.concurrency)
    with ThreadPoolExecutor(RESET_THREADS + LANES, thread_name_prefix="rollout-rounds") as executor:
        while queue or starting or any(lane.active or lane.call for lane in lanes):
            while queue and sum(len(lane.active) + len(lane.decided) for lane in lanes) + len(starting) < limit:
                play = EpisodePlay(source, policy, queue.popleft(), description, identity)
                starting.add(executor.submit(_started, play, config.time_limit_s))
            if starting:
                idle = not any(lane.active or lane.call for lane in lanes)
                done, starting = _settled(starting, block=idle)
                for future in done:
                    play, failure = future.result()
                    if failure is None:
                        min(lanes, key=lambda lane: len(lane.active)).active.append(play)
                    else:
                        play.fail(failure)
                        yield play.end()
            for lane in lanes:
                if lane.call is not None:
                    yield from _settle_lane(lane)
                yield from _decide_lane(lane)
                if lane.decided:
                    lane.call = executor.submit(_step_lane, source.servers, lane.decided)


def _decide_lane(lane: _Lane) -> Iterator[EpisodeRecord]:
    """Ask every active episode of the lane for its next action."""
    lane.decided = []
    for play in lane.active:
        try:
            lane.decided.append((play, play.decide()))
        except Exception as exc:
            play.fail(exc)
            yield play.end()
    lane.active = []


def _step_lane(servers: Any, decided: list[tuple[EpisodePlay, Pending]]) -> tuple[list[Any], float]:
    """One ``step_many`` for the lane (one call per server) and its wall time."""
    tick = time.monotonic()
    try:
        results = servers.step_many([play.env for play, _ in decided], [pending.action for _, pending in decided])
    except Exception as exc:  # the pool failed as a whole: every episode of the lane fails with it
        results = [exc] * len(decided)
    return results, time.monotonic() - tick


def _settle_lane(lane: _Lane) -> Iterator[EpisodeRecord]:
    """Record the lane's answers; the episodes that go on stay active in the lane."""
    assert lane.call is not None
    results, env_s = lane.call.result()
    lane.call = None
    for (play, pending), result in zip(lane.decided, results, strict=True):
        if isinstance(result, BaseException):
            play.fail(result)
            yield play.end()
        elif play.accept(pending, result, env_s):  # each episode waited for the whole call
            yield play.end()
        else:
            lane.active.append(play)
    lane.decided = []


def _started(play: EpisodePlay, time_limit_s: float | None) -> tuple[EpisodePlay, BaseException | None]:
    try:
        play.start(time_limit_s)
    except Exception as exc:
        return play, exc
    return play, None


def _settled(starting: set[Future], *, block: bool) -> tuple[set[Future], set[Future]]:
    """The starts that have finished (waiting for one when nothing else can be stepped) and the rest."""
    done, rest = wait(starting, timeout=None if block else 0, return_when=FIRST_COMPLETED)
    return set(done), set(rest)

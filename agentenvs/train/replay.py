"""Replay of delayed-reward episodes: rollouts whose reward arrived after the episode (docs/forecast.md, "Replay").

A forecast episode ends with reward 0, ``reward_pending=True`` and a ``resolution_id`` in its last step's
info; the episode record is written to an episode file as usual. When the question resolves, the prediction
store holds the scores. :class:`ReplaySource` joins the two: it reads the episode files, looks each pending
episode up in the store, and hands out the resolved ones with the reward backfilled (the last step's reward,
the return and the score become the stored ``reward``), each once. Voided predictions are dropped; pending
ones wait for a later call. The lag between acting (the prediction's ``created_at``) and learning (now) is
what :meth:`take` reports with each batch, so a trainer can log how stale its signal is. Groups are handed out
whole, once no member waits; the trainer corrects the replayed rows for the policy having moved on since
(a truncated importance weight against their recorded logprobs, ``loss.importance_correction``).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.errors import UnknownPrediction
from agentenvs.predictions import Prediction, PredictionStore
from agentenvs.rollout.episode import finish
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.rollout.store import EPISODES_FILE, EpisodeStore, read_jsonl


def resolution_id(record: EpisodeRecord) -> str | None:
    """The ``resolution_id`` of an episode whose reward is pending, else None."""
    for step in reversed(record.steps):
        if step.info.get("reward_pending") and step.info.get("resolution_id"):
            return str(step.info["resolution_id"])
    return None


def backfill(record: EpisodeRecord, prediction: Prediction) -> EpisodeRecord:
    """A copy of ``record`` with the resolved prediction's reward on its last step, return and score, and its
    outcome (``success`` as the resolver scored it, the end reason, the failure cause) as if it had ended now."""
    reward = float(prediction.scores["reward"])
    success = bool(prediction.scores.get("success", record.success))
    steps = list(record.steps)
    last = steps[-1]
    info = {
        **last.info,
        "reward_pending": False,
        "score": reward,
        "success": success,
        "end_reason": "success" if success else "failure",
        "metrics": {**last.info.get("metrics", {})},
    }
    info["metrics"].update({k: v for k, v in prediction.scores.items() if k not in ("reward", "success")})
    steps[-1] = dataclasses.replace(last, reward=reward, info=info)
    filled = dataclasses.replace(record, steps=steps, return_=sum(s.reward for s in steps))
    finish(filled)
    return filled


class ReplaySource:
    """Backfilled episodes from episode files and a prediction store, each handed out once."""

    def __init__(self, episodes: str | Path | Sequence[str | Path], predictions: str | Path):
        self.paths = [Path(p) for p in ([episodes] if isinstance(episodes, (str, Path)) else episodes)]
        self.store = PredictionStore(predictions)
        self.used: set[str] = set()

    def ready(self) -> list[list[tuple[EpisodeRecord, Prediction]]]:
        """Groups not handed out yet in which no member waits any more, as their resolved members with their
        predictions (voided members left out), oldest resolution first. A group is handed out whole, so its
        members are normalised against each other (GRPO needs the group, not a few of its members)."""
        members: dict[str, list[tuple[EpisodeRecord, Prediction | None]]] = {}
        for record in self._pending_records():
            try:
                prediction: Prediction | None = self.store.get(resolution_id(record) or "")
            except UnknownPrediction:
                prediction = None  # acted without a store, or the store was replaced: nothing to learn from
            members.setdefault(record.group_id, []).append((record, prediction))
        groups = []
        for group in members.values():
            if any(p is not None and p.state == "pending" for _, p in group):
                continue
            resolved = [(r, p) for r, p in group if p is not None and p.state == "resolved"]
            if resolved:
                groups.append(sorted(resolved, key=lambda pair: pair[0].episode_id))
        return sorted(groups, key=lambda g: (max(p.resolved_at for _, p in g), g[0][0].episode_id))

    def _pending_records(self) -> list[EpisodeRecord]:
        """Each pending record of the episode files not handed out yet (the first copy of an episode id)."""
        seen: set[str] = set()
        found = []
        for path in self.paths:
            if not path.exists() or (path.is_dir() and not any(path.glob("*.jsonl"))):
                continue
            for record in read_jsonl(path):
                if resolution_id(record) is None or record.episode_id in self.used or record.episode_id in seen:
                    continue
                seen.add(record.episode_id)
                found.append(record)
        return found

    def take(self, limit: int | None = None, *, now: float | None = None) -> tuple[list[EpisodeRecord], dict[str, Any]]:
        """Whole groups (oldest resolution first), up to ``limit`` episodes (but at least one group when any
        is ready), backfilled, and the batch's lag metrics."""
        pairs: list[tuple[EpisodeRecord, Prediction]] = []
        for group in self.ready():
            if pairs and limit is not None and len(pairs) + len(group) > limit:
                break
            pairs += group
        now = time.time() if now is None else now
        records = [backfill(record, prediction) for record, prediction in pairs]
        self.used.update(r.episode_id for r in records)
        self.used.update(self._voided_members({r.group_id for r in records}))
        lags = [now - p.created_at for _, p in pairs]
        waits = [p.resolved_at - p.created_at for _, p in pairs]
        metrics: dict[str, Any] = {"replay/episodes": len(records), "replay/groups": len({r.group_id for r in records})}
        if records:
            metrics.update(
                {
                    "replay/lag_s_median": statistics.median(lags),
                    "replay/lag_s_max": max(lags),
                    "replay/resolve_wait_s_median": statistics.median(waits),
                }
            )
        return records, metrics

    def _voided_members(self, groups: set[str]) -> list[str]:
        """The episode ids of the handed-out groups' members that were left out (voided, unknown)."""
        return [r.episode_id for r in self._pending_records() if r.group_id in groups]

    def keep_pending(self, records: Sequence[EpisodeRecord]) -> int:
        """Append the live records whose reward is pending to the first episode file (so a later step
        replays them once resolved); how many were kept."""
        pending = [r for r in records if resolution_id(r) is not None]
        if pending:
            with EpisodeStore(self._file()) as store:
                for record in pending:
                    store.add(record)
        return len(pending)

    def _file(self) -> Path:
        path = self.paths[0]
        return path / EPISODES_FILE if path.is_dir() or not path.suffix else path

    def close(self) -> None:
        self.store.close()

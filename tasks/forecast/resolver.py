"""Resolving stored predictions: the simulated clock for panel questions, given outcomes for real ones.

``advance`` moves the store's clock and resolves every pending prediction of a panel question that came due,
with the outcome the world produced. Each panel question lives in its own world, so "due" is relative: a
prediction stored at store tick ``t`` on a question open at ``open_tick`` resolving at ``resolution_tick``
is due once the store's clock reaches ``t + resolution_tick - open_tick``. ``resolve_question`` applies a
real outcome to all pending predictions of one question
(``PredictionStore.resolve_question``). Both are safe to run in several processes at once:
the store resolves each prediction exactly once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from agentenvs import panels
from agentenvs.predictions import PredictionStore

SPLITS = ("train", "dev", "test")


@lru_cache(maxsize=1)
def panel_questions() -> dict[str, dict[str, Any]]:
    """Every panel question by task id."""
    return {task["task_id"]: task for split in SPLITS for task in panels.load_panel("forecast", split)}


def advance(store: PredictionStore, ticks: int) -> dict[str, int]:
    """Advance the clock by ``ticks`` and resolve what came due; counts of resolved and still pending."""
    now = store.advance_clock(ticks)
    questions, resolved, waiting = panel_questions(), 0, 0
    for prediction in store.pending():
        task = questions.get(prediction.question_id)
        if task is None or "resolution_tick" not in task:
            continue  # a real question: resolved by resolve_question when its outcome is known
        if prediction.created_tick + task["resolution_tick"] - task["open_tick"] <= now:
            resolved += store.resolve(prediction.resolution_id, task["outcome"])
        else:
            waiting += 1
    return {"clock": now, "resolved": resolved, "pending": waiting}

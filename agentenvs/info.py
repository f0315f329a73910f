"""The info vocabulary: the same key means the same thing in every environment (DESIGN §2)."""

from __future__ import annotations

import hashlib

INFO_TYPES: dict[str, type | tuple[type, ...]] = {
    "task_id": str,
    "split": str,
    "task_type": str,
    "turn": int,
    "max_turns": int,
    "admissible_actions": list,
    "action_valid": bool,
    "success": bool,
    "score": float,
    "raw_score": (int, float),
    "end_reason": str,
    "anchor": str,
    "state_hash": str,
    "milestones": list,
    "metrics": dict,
    "privileged": dict,
    "reward_pending": bool,
    "resolution_id": str,
    "failure_cause": str,
}
"""Every key an ``info`` dict may hold, with its type. A key that does not apply is absent."""

END_REASONS = ("success", "failure", "max_turns", "error")
"""The values of ``info['end_reason']``."""

FAILURE_CAUSES = ("none", "policy", "parse", "timeout", "infra")
"""The values of ``failure_cause`` in episode records: ``infra`` and ``timeout`` mark rollouts a
trainer should drop rather than learn from."""

EPISODE_END_KEYS = ("success", "end_reason")
"""Keys present only in the info of the step that ends an episode."""


def text_hash(text: str) -> str:
    """A short stable hash of a text, for ``anchor`` and ``state_hash``."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def check_info(info: dict) -> list[str]:
    """Problems with an info dict against the vocabulary; empty when it conforms."""
    problems = []
    for key, value in info.items():
        expected = INFO_TYPES.get(key)
        if expected is None:
            problems.append(f"unknown info key {key!r} (the vocabulary is agentenvs.info.INFO_TYPES)")
        elif isinstance(value, bool) and expected in (int, float, (int, float)):
            problems.append(f"info[{key!r}] is a bool, expected {expected}")
        elif not isinstance(value, expected):
            problems.append(f"info[{key!r}] is {type(value).__name__}, expected {expected}")
    if "score" in info and isinstance(info["score"], float) and not 0.0 <= info["score"] <= 1.0:
        problems.append(f"info['score'] = {info['score']} is outside [0, 1]; keep the native scale in raw_score")
    if "end_reason" in info and info["end_reason"] not in END_REASONS:
        problems.append(f"info['end_reason'] = {info['end_reason']!r} is not one of {END_REASONS}")
    for key in ("admissible_actions", "milestones"):
        if isinstance(info.get(key), list) and not all(isinstance(v, str) for v in info[key]):
            problems.append(f"info[{key!r}] must be a list of str")
    metrics = info.get("metrics")
    if isinstance(metrics, dict):
        for name, value in metrics.items():
            if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"info['metrics'][{name!r}] must map str to a number")
    return problems

"""The info vocabulary: the same key means the same thing in every environment (docs/contract.md)."""

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
    "parsed_action": dict,
    "search_count": int,
    "valid_search_count": int,
    "retrieved_ids": list,
}
"""Every key an ``info`` dict may hold, with its type. A key that does not apply is absent.

``score`` (progress so far, in [0, 1]) and ``anchor`` are on every info, reset's included;
``anchor`` identifies the state: equal anchors mean the same state, whatever the path to it;
``parsed_action`` the structure of the last action where the environment parses a grammar (shellops:
the programs, pipes, redirections and operators of a shell command); ``search_count``,
``valid_search_count`` and ``retrieved_ids`` the searches of the episode so far, those that reached
the retriever, and the ids of the passages the last one returned (search-QA)."""

PRIVILEGED_TYPES: dict[str, type | tuple[type, ...]] = {
    "expert_plan": list,
    "expert_action": str,
    "best_arm": int,
    "arm_means": list,
    "arm_stds": list,
    "task_params": dict,
    "gold_answer": str,
    "golden_answers": list,
    "supporting_ids": list,
    "sub_queries": list,
    "baseline_actions": dict,
}
"""Every key ``info['privileged']`` may hold (docs/contract.md#privileged-keys): ``expert_plan`` the
commands an expert would play from this state to solve the task; ``expert_action`` its next command;
``best_arm`` the index, in ``admissible_actions``, of the action with the highest expected payoff;
``arm_means``/``arm_stds`` each action's hidden payoff mean and standard deviation, in that order;
``task_params`` the hidden parameters the task was built with (their names are the environment's);
``gold_answer`` the answer the task is scored against (question answering, prediction);
``golden_answers`` every answer that scores (search-QA), ``supporting_ids`` the passages that hold the
facts, ``sub_queries`` one golden query per hop; ``baseline_actions`` the next action of each named
reference baseline (``baseline:NAME`` policies)."""

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
    problems += _check_privileged(info.get("privileged"))
    metrics = info.get("metrics")
    if isinstance(metrics, dict):
        for name, value in metrics.items():
            if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"info['metrics'][{name!r}] must map str to a number")
    return problems


def _check_privileged(privileged: object) -> list[str]:
    """Problems with ``info['privileged']``: keys outside :data:`PRIVILEGED_TYPES`, wrong types."""
    if not isinstance(privileged, dict):
        return []
    problems = []
    for key, value in privileged.items():
        expected = PRIVILEGED_TYPES.get(key)
        if expected is None:
            problems.append(f"unknown privileged key {key!r} (the vocabulary is agentenvs.info.PRIVILEGED_TYPES)")
        elif isinstance(value, bool) or not isinstance(value, expected):
            problems.append(f"info['privileged'][{key!r}] is {type(value).__name__}, expected {expected}")
    plan = privileged.get("expert_plan")
    if isinstance(plan, list) and not all(isinstance(step, str) for step in plan):
        problems.append("info['privileged']['expert_plan'] must be a list of str")
    return problems

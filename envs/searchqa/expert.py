"""The expert: it issues each hop's golden sub-query and answers from what the searches returned.

Only the first subject comes from the task (the question names it too); every later subject, and the
answer, is read from the retrieved passages (``reading.read_fact``), never from the gold fields. A fact
it cannot find leaves it answering ``unknown``.
"""

from __future__ import annotations

from typing import Any

from agentenvs.envs.searchqa.reading import plain_name, read_fact, sub_query


def next_action(task: dict[str, Any], searched: list[list[str]]) -> str:
    """The next action, given the passages each search so far returned (in order)."""
    hops = task.get("hops")
    if not hops:
        return "<answer>unknown</answer>"
    comparison = task.get("task_type") == "comparison"
    subjects = [hops[0]["subject"]]
    values: list[str | None] = []
    for i, passages in enumerate(searched[: len(hops)]):
        value = read_fact(passages, subjects[i], hops[i]["relation"])
        values.append(value)
        if i + 1 < len(hops):
            following = hops[i + 1]["subject"] if comparison else value
            if following is None:
                return "<answer>unknown</answer>"
            subjects.append(following)
    if len(values) < len(hops):
        hop = len(values)
        return f"<search>{sub_query(subjects[hop], hops[hop]['relation'])}</search>"
    return f"<answer>{_answer(task, subjects, values)}</answer>"


def _answer(task: dict[str, Any], subjects: list[str], values: list[str | None]) -> str:
    if None in values:
        return "unknown"
    if task.get("task_type") != "comparison":
        return plain_name(str(values[-1]))
    numbers = [int(v) for v in values]  # type: ignore[arg-type]
    pick = min if task.get("compare") == "min" else max
    return plain_name(subjects[numbers.index(pick(numbers))])


def no_search_guess(task: dict[str, Any]) -> str:
    """The no-search baseline's answer: the first option of a comparison, else a guess from the question."""
    hops = task.get("hops") or []
    if task.get("task_type") == "comparison" and hops:
        return plain_name(hops[0]["subject"])
    return "unknown"

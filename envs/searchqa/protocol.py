"""Search-R1's turn protocol: ``<search>q</search>`` or ``<answer>a</answer>`` in, ``<information>`` out.

The texts are the ones Search-R1's ``generation.py`` writes (``postprocess_predictions``,
``execute_predictions``), so a model trained there sees the same observations here.
"""

from __future__ import annotations

import re

from agentenvs.actions import ExtractedAction

TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)
INSTRUCTIONS = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. "
    "For example, <answer> Beijing </answer>."
)


def parse(action: str) -> tuple[str | None, str]:
    """``("search" | "answer", content)`` of the first tag in ``action``, or ``(None, "")``."""
    found = TAG.search(action)
    if found is None:
        return None, ""
    return found.group(1), found.group(2).strip()


def first_tag(response: str) -> ExtractedAction | None:
    """The first complete ``<search>``/``<answer>`` tag of a response, tags included (Search-R1 stops there)."""
    found = TAG.search(response)
    return None if found is None else ExtractedAction(found.group(0), found.start(), found.end())


def information(passages: str) -> str:
    return f"\n\n<information>{passages.strip()}</information>\n\n"

"""Finding the action inside a full model response (reasoning plus action).

The span is returned with the action so the rollout layer can label action tokens apart from
reasoning tokens (ActFocus-style weighting, turn-level ratios).
"""

from __future__ import annotations

import re
from typing import NamedTuple

ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)


class ExtractedAction(NamedTuple):
    """An action and its character span ``response[start:end]``."""

    action: str
    start: int
    end: int


def strip_span(text: str, start: int, end: int) -> ExtractedAction:
    """The span ``text[start:end]`` narrowed to exclude surrounding white space."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return ExtractedAction(text[start:end], start, end)


def extract_tagged_action(response: str, pattern: re.Pattern[str] = ACTION_TAG) -> ExtractedAction | None:
    """The last ``<action>...</action>`` block (or the last match of ``pattern``'s first group)."""
    matches = list(pattern.finditer(response))
    if not matches:
        return None
    last = matches[-1]
    found = strip_span(response, last.start(1), last.end(1))
    return found if found.action else None


def extract_last_line(response: str) -> ExtractedAction | None:
    """The last non-empty line, for responses that carry no tags (a person, a scripted policy)."""
    end = len(response)
    while end > 0:
        start = response.rfind("\n", 0, end) + 1
        found = strip_span(response, start, end)
        if found.action:
            return found
        end = start - 1
    return None


def extract_action(response: str) -> ExtractedAction | None:
    """The default grammar: the last ``<action>`` block; without any tag, the last non-empty line.

    ``None`` means the response holds no action; the rollout layer then steps with an empty action,
    which every environment answers with ``action_valid`` False.
    """
    if ACTION_TAG.search(response) or "<action>" in response.lower():
        return extract_tagged_action(response)
    return extract_last_line(response)

"""The bandit's action grammar: ``pull[i]`` (also ``pull(i)``, ``pull i``), ``pull NAME`` or a bare arm name.

Indices are 0-based and names are matched case-insensitively (ASCII case folding only, so unicode
look-alikes such as the Kelvin sign never match). :func:`parse_action` reads one action strictly;
:func:`find_action` finds one inside a full model response and returns its span.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from agentenvs.actions import ACTION_TAG, ExtractedAction, extract_action

PULL_INDEX = r"pull\s*(?:\[\s*([0-9]+)\s*\]|\(\s*([0-9]+)\s*\)|\s+([0-9]+)\b)"
PULL_INDEX_RE = re.compile(PULL_INDEX, re.IGNORECASE | re.ASCII)


def _names_pattern(names: Sequence[str]) -> str:
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


def _arm_of(match: re.Match[str], names: Sequence[str]) -> int:
    index = next((group for group in match.groups()[:3] if group is not None), None)
    if index is not None:
        return int(index)
    name = match.group("name").lower()
    return [n.lower() for n in names].index(name)


@lru_cache(maxsize=256)
def _compiled(names: tuple[str, ...]) -> re.Pattern[str]:
    if not names:
        return PULL_INDEX_RE
    return re.compile(rf"{PULL_INDEX}|(?:\bpull\s+)?\b(?P<name>{_names_pattern(names)})\b", re.IGNORECASE | re.ASCII)


def _grammar(names: Sequence[str]) -> re.Pattern[str]:
    return _compiled(tuple(names))


def parse_action(action: str, names: Sequence[str]) -> int | None:
    """The 0-based arm an action names (possibly out of range), or ``None`` when it is not in the grammar.

    The whole action must be one pull, optionally wrapped in one ``<action>...</action>`` tag.
    """
    text = action.strip()
    tagged = ACTION_TAG.fullmatch(text)
    match = _grammar(names).fullmatch(tagged.group(1).strip() if tagged else text)
    return None if match is None else _arm_of(match, names)


def find_action(response: str, names: Sequence[str]) -> ExtractedAction | None:
    """The action in a full model response, with its character span.

    Inside the last ``<action>`` block if there is one, else in the whole response: the last
    ``pull[...]`` if any, else the last arm name mentioned. Without either, the default grammar's
    answer (the tag's content or the last line), which the environment then reports as invalid.
    """
    tagged = list(ACTION_TAG.finditer(response))
    start, end = (tagged[-1].start(1), tagged[-1].end(1)) if tagged else (0, len(response))
    region = response[start:end]
    matches = list(_grammar(names).finditer(region))
    explicit = [m for m in matches if m.group(0).lower().startswith("pull")]
    chosen = (explicit or matches or [None])[-1]
    if chosen is None:
        return extract_action(response)
    return ExtractedAction(chosen.group(0), start + chosen.start(), start + chosen.end())

"""Parsing what a forecasting agent submits: ``<answer>...</answer>`` for each question kind (docs/forecast.md).

binary: a probability, ``<answer>0.7</answer>``; choice: ``{"option": p, ...}`` or a list of probabilities in
the order the options are listed; numeric: quantiles at the question's levels ``{"0.1": low, "0.5": median,
"0.9": high}`` or a list of values in level order. A JSON object that names a key twice is refused (which of
two values would count is not the agent's to leave open); the rest is :func:`check_forecast`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.forecast_scores import level_text, quantile_levels
from agentenvs.predictions import check_forecast

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
TOOL = re.compile(r"^\s*(search|read)\[(.*)\]\s*$", re.DOTALL | re.IGNORECASE)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise InvalidArgument(f"the answer names {repeated} more than once; give each key once")
    return dict(pairs)


def parse_answer(text: str, kind: str, question: Mapping[str, Any]) -> Any:
    """The canonical forecast inside an answer to ``question``, or :class:`InvalidArgument` saying what form
    is expected (for a numeric question: which quantile levels)."""
    try:
        value = json.loads(text.strip(), object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):  # not JSON, a number of over 4300 digits, nesting past the parser
        raise InvalidArgument(f"the answer {text.strip()[:60]!r} is not a number, JSON list or JSON object") from None
    options = question.get("options")
    if kind == "choice" and isinstance(value, list):
        if options is None or len(value) != len(options):
            raise InvalidArgument(f"a list answer gives one probability per option, in order: {options}")
        value = dict(zip(options, value, strict=True))
    if kind == "numeric" and isinstance(value, list):
        levels = [level_text(level) for level in quantile_levels(question)]
        if len(value) != len(levels):
            raise InvalidArgument(
                f"a list answer to a numeric question gives the quantiles at levels {levels}, in order"
            )
        value = dict(zip(levels, value, strict=True))
    return check_forecast(kind, value, question)


def find_answer(action: str) -> str | None:
    """The text inside the last ``<answer>`` tag of ``action``, if any (earlier ones are drafts)."""
    matches = ANSWER_TAG.findall(action)
    return matches[-1] if matches else None

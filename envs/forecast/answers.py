"""Parsing what a forecasting agent submits: ``<answer>...</answer>`` for each question kind (docs/forecast.md).

binary: a probability, ``<answer>0.7</answer>``; choice: ``{"option": p, ...}`` or a list of probabilities in
the order the options are listed; numeric: quantiles ``{"0.1": low, "0.5": median, "0.9": high}`` or a list
``[low, median, high]`` (read as the 0.1, 0.5 and 0.9 quantiles).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.predictions import check_forecast

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
TOOL = re.compile(r"^\s*(search|read)\[(.*)\]\s*$", re.DOTALL | re.IGNORECASE)
LIST_QUANTILES = ("0.1", "0.5", "0.9")


def parse_answer(text: str, kind: str, options: list[str] | None) -> Any:
    """The canonical forecast inside an answer, or :class:`InvalidArgument` saying what form is expected."""
    try:
        value = json.loads(text.strip())
    except json.JSONDecodeError:
        raise InvalidArgument(f"the answer {text.strip()[:60]!r} is not a number, JSON list or JSON object") from None
    if kind == "choice" and isinstance(value, list):
        if options is None or len(value) != len(options):
            raise InvalidArgument(f"a list answer gives one probability per option, in order: {options}")
        value = dict(zip(options, value, strict=True))
    if kind == "numeric" and isinstance(value, list):
        if len(value) != len(LIST_QUANTILES):
            raise InvalidArgument("a list answer to a numeric question is [low, median, high] (10%, 50%, 90%)")
        value = dict(zip(LIST_QUANTILES, value, strict=True))
    forecast = check_forecast(kind, value)
    if kind == "choice" and options is not None and set(forecast) != set(options):
        raise InvalidArgument(f"a choice answer gives a probability to each option: {options}")
    return forecast


def find_answer(action: str) -> str | None:
    """The text inside the last ``<answer>`` tag of ``action``, if any."""
    matches = ANSWER_TAG.findall(action)
    return matches[-1] if matches else None

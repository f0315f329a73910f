"""Loading a user's own forecasting questions from JSONL (docs/forecast.md, "Bring your own questions").

One JSON object a line: ``question_id``, ``question``, ``kind`` (binary, choice, numeric), ``criteria``
(resolution criteria), ``close_date``; ``options`` (choice), ``center`` and ``scale`` (numeric: where the
outcome is expected and its plausible spread, what the reward is measured on); optional ``quantiles``
(numeric: the levels answers give, default 0.1, 0.5, 0.9), ``background`` (a list of texts the agent may
search) and ``outcome`` once known.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.forecast_scores import check_rules
from agentenvs.predictions import KINDS, check_outcome

REQUIRED = ("question_id", "question", "kind", "criteria", "close_date")


def question_row(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """One checked question as an environment task, or an error that names the line and the field."""
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise InvalidArgument(f"{where}: missing {missing}; each line needs {list(REQUIRED)}")
    if raw["kind"] not in KINDS:
        raise InvalidArgument(f"{where}: kind {raw['kind']!r} is not one of {KINDS}")
    try:
        check_rules(raw["kind"], raw)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
    row = {**raw, "task_id": str(raw["question_id"]), "task_type": f"custom-{raw['kind']}"}
    if raw.get("outcome") is not None:
        row["outcome"] = check_outcome(raw["kind"], raw["outcome"], raw.get("options"))
    return row


def load_questions(path: str | Path) -> tuple[dict[str, Any], ...]:
    """Every question of a JSONL file, checked; task ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgument(f"no question file {path}")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                raise InvalidArgument(f"{path}:{number} is not JSON") from None
            rows.append(question_row(raw, f"{path}:{number}"))
    ids = [row["task_id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"{path}: question_id values must be unique")
    return tuple(rows)

"""The episode file of an evaluation run: appended durably, and read back to resume a run.

Each finished episode is one line, written with flush and fsync before the next one starts, so a
killed run loses at most the episodes that were still being played. A line cut short by the kill is
cut off on resume, so the file stays valid JSONL.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from agentenvs.evaluation.scoring import iter_records


def repair_tail(path: Path) -> int:
    """Drop a trailing partial line (an interrupted write); returns the number of bytes removed."""
    if not path.is_file():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with open(path, "r+b") as handle:
        handle.truncate(keep)
    return len(data) - keep


def finished(path: Path) -> list[dict[str, Any]]:
    """The records already in the episode file (none when it does not exist yet)."""
    return list(iter_records(path)) if path.is_file() else []


class DurableAppender:
    """Appends JSON lines and makes each one durable (flush + fsync) before returning."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(path)
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        with self._lock:
            self._handle.close()

    def __enter__(self) -> DurableAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

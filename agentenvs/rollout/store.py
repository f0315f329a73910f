"""The episode store: one append-only JSONL file that ``agentenvs rollout``, ``agentenvs eval`` and the
trainer write and resume from (docs/rollout.md, "Episode files").

Each record is one line, written with flush and fsync before ``append`` returns, so a killed writer
loses at most the episodes still being played. A kill in the middle of a write leaves a torn last
line: readers skip it and the next writer cuts it off before appending, so the file stays valid
JSONL. A resumed run looks records up by their key (``episode_id``) and plays only the others.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord

EPISODES_FILE = "episodes.jsonl"
EPISODE_SCHEMA_PREFIX = "agentenvs.episode/"


def read_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON line of ``path``; a torn last line is skipped."""
    path = Path(path)
    with open(path, encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not line.endswith("\n"):
                return  # an interrupted write; the next writer cuts it off
            raise InvalidArgument(f"{path}:{number} is not JSON; the file holds one JSON object a line") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"{path}:{number} is a JSON {type(value).__name__}, not an object")
        yield number, value


def repair_tail(path: str | Path) -> int:
    """Make the file end at a line end: a torn last line is cut off, a whole one missing only its
    newline gets it (readers counted it as written). Returns the number of bytes removed."""
    path = Path(path)
    if not path.is_file():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    try:
        json.loads(data[keep:])
    except ValueError:
        with open(path, "r+b") as handle:
            handle.truncate(keep)
        return len(data) - keep
    with open(path, "ab") as handle:
        handle.write(b"\n")
    return 0


class JsonlLog:
    """An append-only file of JSON objects, each made durable (flush + fsync) before ``append`` returns.

    Safe to append from many threads. The file is opened on the first append, after its torn tail
    (if any) is repaired, so reading a log never changes it.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._handle: Any = None
        self._lock = threading.Lock()
        self.count = 0
        """Records appended through this object."""

    def rows(self) -> list[dict[str, Any]]:
        """Every object in the file (none when it does not exist yet), torn tail left out."""
        return [value for _, value in read_lines(self.path)] if self.path.is_file() else []

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                repair_tail(self.path)
                self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._write_line(line)
            self.count += 1

    def _write_line(self, line: str) -> None:
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def rewrite(self, rows: Iterable[dict[str, Any]]) -> None:
        """Replace the file's contents atomically (a temporary file renamed over it)."""
        self.close()
        staging = self.path.with_name(self.path.name + ".partial")
        with open(staging, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        staging.replace(self.path)

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EpisodeStore(JsonlLog):
    """The episode records of one run (``agentenvs.episode/*`` objects), keyed by ``episode_id``."""

    def rows(self) -> list[dict[str, Any]]:
        """The stored records as JSON objects (what scorers read); each must be an episode record."""
        rows = []
        for number, row in read_lines(self.path) if self.path.is_file() else ():
            schema = str(row.get("schema", ""))
            if not schema.startswith(EPISODE_SCHEMA_PREFIX):
                raise InvalidArgument(
                    f"{self.path}:{number} is not an episode record (schema {schema!r}, expected "
                    "'agentenvs.episode/2'); pass the episodes.jsonl written by `agentenvs eval` or `agentenvs rollout`"
                )
            rows.append(row)
        return rows

    def episodes(self) -> list[EpisodeRecord]:
        """The stored records, parsed (a record of another schema version is an error)."""
        episodes = []
        for index, row in enumerate(self.rows()):
            try:
                episodes.append(EpisodeRecord.from_dict(row))
            except (InvalidArgument, TypeError) as exc:
                raise InvalidArgument(f"{self.path}: record {index + 1} is not a valid episode record: {exc}") from exc
        return episodes

    def finished(self) -> dict[str, EpisodeRecord]:
        """The stored episodes by ``episode_id``, the first kept where an id appears twice."""
        done: dict[str, EpisodeRecord] = {}
        for record in self.episodes():
            done.setdefault(record.episode_id, record)
        return done

    def add(self, record: EpisodeRecord | dict[str, Any]) -> None:
        """Append one finished episode."""
        self.append(record.to_dict() if isinstance(record, EpisodeRecord) else record)

    def __enter__(self) -> EpisodeStore:
        return self


def episode_files(path: str | Path, *, recursive: bool = False) -> list[Path]:
    """The episode files a path names: the file itself, or the ``*.jsonl`` files of a folder."""
    path = Path(path)
    files = sorted(path.rglob("*.jsonl") if recursive else path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise InvalidArgument(f"no episode records at {path} (expected a .jsonl file or a folder of them)")
    return files


def read_jsonl(path: str | Path) -> Iterator[EpisodeRecord]:
    """The records of an episode file (or of a folder's ``*.jsonl`` files), in order."""
    for file in episode_files(path):
        yield from EpisodeStore(file).episodes()


def write_jsonl(path: str | Path, records: Iterable[EpisodeRecord]) -> Path:
    """Write records to ``path`` (replacing it); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    EpisodeStore(path).rewrite(record.to_dict() for record in records)
    return path

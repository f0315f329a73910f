"""Corpora in Search-R1's format, the hits a retriever returns, and the checks every query goes through.

A corpus is JSONL (optionally gzipped) of ``{"id", "contents"}`` with ``contents`` = ``"Title"\\ntext``,
the format of Search-R1's ``wiki-18.jsonl``; a user's own corpus in that format needs no conversion.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from agentenvs.errors import InvalidArgument

MAX_QUERY_CHARS = 2000
MAX_QUERIES = 512
MAX_TOPK = 100


@dataclass(frozen=True)
class Hit:
    id: str
    score: float


class Corpus:
    """Passages by id, in file order; held in memory (20k passages take about 10 MB)."""

    def __init__(self, documents: dict[str, str]):
        self.contents = documents
        self.ids = list(documents)

    def __len__(self) -> int:
        return len(self.ids)

    def records(self):
        return ({"id": doc_id, "contents": text} for doc_id, text in self.contents.items())

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        """Read a corpus file; a bad line gets an error that names the file and the line."""
        path = Path(path)
        if not path.is_file():
            raise InvalidArgument(f'corpus file {path} does not exist; pass a JSONL file of {{"id", "contents"}} lines')
        opener = gzip.open if path.suffix == ".gz" else open
        documents: dict[str, str] = {}
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                documents_add(documents, parse_line(raw, path, number), path, number)
        if not documents:
            raise InvalidArgument(f"corpus file {path} holds no passages")
        return cls(documents)


def parse_line(raw: bytes, path: Path, number: int) -> dict:
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidArgument(f"{path} line {number} is not UTF-8; re-encode the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{path} line {number} is not JSON ({exc.msg}); each line must be one JSON object"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("contents"), str) or "id" not in record:
        raise InvalidArgument(f'{path} line {number} needs "id" and a string "contents" (Search-R1\'s corpus format)')
    return record


def documents_add(documents: dict[str, str], record: dict, path: Path, number: int) -> None:
    doc_id = str(record["id"])
    if doc_id in documents:
        raise InvalidArgument(f"{path} line {number} repeats the id {doc_id!r}; ids must be unique")
    documents[doc_id] = record["contents"]


def split_title(contents: str) -> tuple[str, str]:
    """``("Title", "text")`` from ``"Title"\\ntext``, as Search-R1's ``_passages2string`` splits it."""
    head, _, text = contents.partition("\n")
    return head.strip().strip('"'), text


def format_passages(contents: list[str]) -> str:
    """Search-R1's rendering of retrieved passages: ``Doc 1(Title: T) text`` lines."""
    lines = []
    for rank, passage in enumerate(contents, 1):
        title, text = split_title(passage)
        lines.append(f"Doc {rank}(Title: {title}) {text}")
    return "\n".join(lines) + ("\n" if lines else "")


def check_queries(queries: object, topk: object) -> tuple[list[str], int]:
    """The queries and top-k of a request, or :class:`InvalidArgument` that says what is allowed."""
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list) or not queries:
        raise InvalidArgument('"queries" must be a non-empty list of strings')
    if len(queries) > MAX_QUERIES:
        raise InvalidArgument(f"{len(queries)} queries in one request; send at most {MAX_QUERIES}")
    for i, query in enumerate(queries):
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument(f"query {i} is empty or not a string; send words to search for")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query {i} has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return queries, check_topk(topk)


def check_topk(topk: object) -> int:
    """``topk`` when it is an integer from 1 to :data:`MAX_TOPK`, else :class:`InvalidArgument`."""
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise InvalidArgument(f'"topk" must be an integer from 1 to {MAX_TOPK}, got {topk!r}')
    return topk

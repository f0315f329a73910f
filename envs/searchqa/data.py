"""Where Search-QA's passages and questions come from: the frozen default corpus, or a user's Search-R1 data.

The default corpus is ``tasks/searchqa/corpus.jsonl.gz``, checked against the sha256 in the panels'
manifest before it is indexed; its BM25 index is built once per corpus into the cache. A user's own
data is Search-R1's: a corpus of ``{"id", "contents"}`` lines, and questions as JSONL or parquet rows
with ``question`` and ``golden_answers`` (FlashRAG's NQ/HotpotQA files) or Search-R1's processed
parquet (``reward_model.ground_truth.target``); ``agentenvs.make("searchqa", corpus=..., questions=...)``.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.errors import InvalidArgument, PanelIntegrityError
from agentenvs.retrieval.lucene import cache_root

_BUILD_LOCK = threading.Lock()


def default_corpus() -> Path:
    """The frozen corpus file, after its sha256 matches the manifest."""
    manifest = panels.read_manifest("searchqa")
    entry = manifest["corpus"]
    path = panels.panel_dir("searchqa") / entry["file"]
    actual = panels.sha256_file(path) if path.is_file() else "missing"
    if actual != entry["sha256"]:
        raise PanelIntegrityError(
            f"{path} has sha256 {actual}, its manifest records {entry['sha256']}; restore it (git checkout) or "
            "regenerate it with `python -m agentenvs.tasks.searchqa.generate`"
        )
    return path


@lru_cache(maxsize=4)
def index_for(corpus: str | None, backend: str = "bm25") -> Path:
    """The cached index folder of a corpus file (the default corpus when None), built on first use."""
    from agentenvs.retrieval.index import build

    path = Path(corpus) if corpus else default_corpus()
    key = panels.sha256_file(path)[:16]
    folder = cache_root().parent / "retrievers" / f"{path.name.split('.')[0]}-{backend}-{key}"
    with _BUILD_LOCK:
        if not (folder / "retriever.json").is_file():
            build(path, backend, folder, progress=False)
    return folder


def _gold(row: dict[str, Any]) -> list[str]:
    answers = row.get("golden_answers")
    if answers is None:
        answers = ((row.get("reward_model") or {}).get("ground_truth") or {}).get("target")
    if isinstance(answers, str):
        answers = [answers]
    if answers is None or not len(answers):
        raise InvalidArgument("a question row needs golden_answers (or Search-R1's reward_model.ground_truth.target)")
    return [str(a) for a in answers]


def _question(row: dict[str, Any]) -> str:
    question = row.get("question") or (row.get("extra_info") or {}).get("question")
    if not isinstance(question, str) or not question.strip():
        raise InvalidArgument('a question row needs a non-empty "question" string')
    return question.strip()


@lru_cache(maxsize=8)
def user_questions(path: str) -> tuple[dict[str, Any], ...]:
    """Tasks from a JSONL or parquet file of questions (split ``user``)."""
    file = Path(path)
    if not file.is_file():
        raise InvalidArgument(
            f"questions file {file} does not exist; pass JSONL or parquet with question and golden_answers"
        )
    if file.suffix == ".parquet":
        import pandas

        rows = pandas.read_parquet(file).to_dict(orient="records")
    else:
        with open(file, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
    tasks = []
    for i, row in enumerate(rows):
        try:
            tasks.append({
                "task_id": f"searchqa-user-{row.get('id', i)}", "task_type": str(row.get("data_source") or "user"),
                "question": _question(row), "golden_answers": _gold(row),
            })  # fmt: skip
        except InvalidArgument as exc:
            raise InvalidArgument(f"{file} row {i}: {exc}") from None
    return tuple(tasks)

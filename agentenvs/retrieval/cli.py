"""``agentenvs index``: build a retriever index folder from a corpus, or show what a folder holds."""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from agentenvs.errors import AgentEnvsError


def configure(parser: argparse.ArgumentParser, command: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  agentenvs index build --corpus wiki-18.jsonl --backend bm25 --out idx/bm25\n"
        "  agentenvs index build --corpus corpus.jsonl.gz --backend hybrid --dense ivf --out idx/hybrid\n"
        "  agentenvs index info idx/bm25\n"
        'The corpus is Search-R1\'s format: JSONL (or .jsonl.gz) lines {"id": ..., "contents": "\\"Title\\"\\ntext"}.\n'
        "The default Search-QA corpus is tasks/searchqa/corpus.jsonl.gz."
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="index a corpus for bm25 (Lucene), dense (faiss + MiniLM) or hybrid search")
    build.add_argument("--corpus", type=Path, required=True, help="JSONL or JSONL.gz of {id, contents}")
    build.add_argument("--backend", choices=("bm25", "dense", "hybrid"), default="bm25", help="default bm25")
    build.add_argument("--dense", choices=("flat", "ivf"), default="flat", help="faiss index for dense and hybrid")
    build.add_argument("--out", type=Path, required=True, help="the index folder to write (replaced if present)")
    build.add_argument("--no-progress", action="store_true", help="no progress bar while embedding")
    info = sub.add_parser("info", help="print an index folder's manifest")
    info.add_argument("folder", type=Path)


def run(args: argparse.Namespace) -> int:
    from agentenvs.retrieval.index import build, read_manifest

    try:
        if args.action == "info":
            print(json.dumps(read_manifest(args.folder), indent=2))
            return 0
        started = time.perf_counter()
        manifest = build(args.corpus, args.backend, args.out, dense=args.dense, progress=not args.no_progress)
    except AgentEnvsError as exc:
        print(f"agentenvs index: {exc}")
        return 2
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"indexed {manifest['documents']} passages ({manifest['backend']}) into {args.out} "
          f"in {time.perf_counter() - started:.1f} s, peak memory {peak:.0f} MiB")  # fmt: skip
    return 0

"""``agentenvs serve-retriever``: Search-R1's retrieval API over an index folder, on waitress.

Build the folder first with ``agentenvs index build``. Waitress answers each request on one of
``--threads`` threads; those threads wait on the coalescer, so ``--threads`` bounds the batch a burst
can form, and ``--max-pending`` bounds the queue (past it, requests get a 429 with ``Retry-After``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
from pathlib import Path

from agentenvs.errors import AgentEnvsError


def configure(parser: argparse.ArgumentParser, command: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "example:\n  agentenvs index build --corpus corpus.jsonl --backend bm25 --out idx\n"
        "  agentenvs serve-retriever --index idx --port 8000\n"
        '  curl -s localhost:8000/retrieve -d \'{"queries": ["who wrote x"], "topk": 3, "return_scores": true}\''
    )
    parser.add_argument("--index", type=Path, required=True, help="an index folder from `agentenvs index build`")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", type=Path, default=None, help="write {url, pid} as JSON here once listening")
    parser.add_argument("--threads", type=int, default=64, help="requests served at once (default 64)")
    parser.add_argument("--connection-limit", type=int, default=1024, help="open connections at most (default 1024)")
    parser.add_argument("--max-batch", type=int, default=64, help="queries searched in one batch (default 64)")
    parser.add_argument("--max-wait-ms", type=float, default=3.0, help="how long a batch waits to fill (default 3 ms)")
    parser.add_argument("--max-pending", type=int, default=2048, help="queued queries before 429s (default 2048)")
    parser.add_argument("--no-batching", action="store_true", help="search each request alone (Search-R1's design)")
    parser.add_argument("--search-threads", type=int, default=2, help="Java threads of one BM25 batch (default 2)")
    parser.add_argument(
        "--token", action="append", default=None, help="accepted bearer token (repeatable; default $AGENTENVS_TOKEN)"
    )


def run(args: argparse.Namespace) -> int:
    from waitress.server import create_server

    from agentenvs.retrieval.index import open_index
    from agentenvs.servers.retriever import create_app

    tokens = tuple(args.token or ([os.environ["AGENTENVS_TOKEN"]] if os.environ.get("AGENTENVS_TOKEN") else []))
    try:
        retriever = open_index(args.index, threads=args.search_threads)
    except AgentEnvsError as exc:
        print(f"agentenvs serve-retriever: {exc}")
        return 2
    app = create_app(
        retriever, batching=not args.no_batching, tokens=tokens, max_batch=args.max_batch,
        max_wait_s=args.max_wait_ms / 1000, max_pending=args.max_pending,
    )  # fmt: skip
    server = create_server(
        app, host=args.host, port=args.port, threads=args.threads, connection_limit=args.connection_limit,
        channel_timeout=60, backlog=2048, ident="agentenvs-retriever",
    )  # fmt: skip
    url = f"http://{args.host}:{server.effective_port}"
    if args.port_file:
        partial = args.port_file.with_suffix(".tmp")
        partial.write_text(json.dumps({"url": url, "pid": os.getpid()}), encoding="utf-8")
        partial.replace(args.port_file)
    print(f"serving {retriever.backend} over {len(retriever.corpus)} passages at {url}/retrieve", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.close())
    with contextlib.suppress(OSError, ValueError):  # closed by SIGTERM
        server.run()
    return 0

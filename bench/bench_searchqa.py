"""Search-QA's retriever: load on the server (batched against unbatched), retrieval quality, and index cost.

- load: 50, 200 and 500 concurrent clients (one thread and one keep-alive connection each), 20 queries
  each, against ``agentenvs serve-retriever`` with coalescing, then with ``--no-batching`` (Search-R1's
  design: each request searched on its own thread), in the same run; errors by kind, queries/s, p50/p99;
- quality: recall@1/3/10 of the supporting passages on the test panel for BM25, dense and hybrid, with
  the question as the one query and with each hop's golden sub-query;
- cost: index build wall time and peak memory of ``agentenvs index build`` for each backend at 20k and
  200k passages (the 200k corpus is ``generate --scale 10``).

``python bench/bench_searchqa.py [--only load|quality|cost]`` writes ``bench/results/searchqa.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import RESULTS, summarize, write_result  # bench/common.py

from agentenvs.envs.searchqa.data import default_corpus
from agentenvs.panels import load_panel
from agentenvs.retrieval.index import build, open_index
from agentenvs.servers.launch import launch_retriever

ROOT = Path(__file__).resolve().parents[1]


def load_clients(url: str, clients: int, per_client: int, queries: list[str]) -> dict[str, Any]:
    """``clients`` threads, each with its own session, sending ``per_client`` one-query requests in turn."""
    import requests

    errors: Counter[str] = Counter()
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(index: int) -> None:
        session = requests.Session()
        barrier.wait()
        for i in range(per_client):
            query = queries[(index * per_client + i) % len(queries)]
            started = time.perf_counter()
            try:
                answer = session.post(f"{url}/retrieve", json={"queries": [query], "topk": 3}, timeout=60)
                kind = "ok" if answer.status_code == 200 else f"http_{answer.status_code}"
            except requests.RequestException as exc:
                kind = type(exc).__name__
            took = time.perf_counter() - started
            with lock:
                if kind == "ok":
                    latencies.append(took)
                else:
                    errors[kind] += 1
        session.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    sent = clients * per_client
    return {"clients": clients, "queries": sent, "ok": len(latencies), "errors": dict(errors), "wall_s": wall,
            "queries_per_s": len(latencies) / wall, "latency": summarize(latencies) if latencies else None}  # fmt: skip


def bench_load(index: Path, backend: str, clients: list[int], per_client: int) -> dict[str, Any]:
    queries = [q for t in load_panel("searchqa", "test") for q in t["sub_queries"]]
    out: dict[str, Any] = {}
    for mode, extra in (("batched", []), ("unbatched", ["--no-batching"])):
        with launch_retriever(index, extra_args=extra) as server:
            load_clients(server.url, 16, 10, queries)  # warm-up: JIT, connections, encoder
            out[mode] = [load_clients(server.url, n, per_client, queries) for n in clients]
            metrics = subprocess.run(["curl", "-s", f"{server.url}/metrics"], capture_output=True, text=True).stdout
            out[mode + "_server_metrics"] = [x for x in metrics.splitlines() if x.startswith("agentenvs_retriever")]
        print(f"load {backend} {mode}: {[round(r['queries_per_s']) for r in out[mode]]} q/s", flush=True)
    out["batched_over_unbatched_qps"] = [
        b["queries_per_s"] / u["queries_per_s"] for b, u in zip(out["batched"], out["unbatched"], strict=True)
    ]
    return out


def recall(retriever, queries: list[str], wanted: list[list[str]], ks=(1, 3, 10)) -> dict[str, float]:
    """Mean fraction of each query's wanted ids found in its top k, for each k."""
    found = []
    for start in range(0, len(queries), 64):
        found += retriever.search(queries[start : start + 64], max(ks))
    pairs = list(zip(found, wanted, strict=True))
    share = {k: [len({h.id for h in hits[:k]} & set(w)) / len(w) for hits, w in pairs] for k in ks}
    return {f"recall@{k}": sum(values) / len(values) for k, values in share.items()}


def questions(tasks: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    return [t["question"] for t in tasks], [t["supporting_ids"] for t in tasks]


def bench_quality(indexes: dict[str, Path]) -> dict[str, Any]:
    tasks = load_panel("searchqa", "test")
    out = {}
    for backend, folder in indexes.items():
        retriever = open_index(folder)
        by_type = {}
        for kind in ("single", "bridge", "comparison"):
            chosen = [t for t in tasks if t["task_type"] == kind]
            by_type[kind] = recall(retriever, *questions(chosen))
        hops = [(q, [i]) for t in tasks for q, i in zip(t["sub_queries"], t["supporting_ids"], strict=True)]
        out[backend] = {
            "question_as_query": recall(retriever, *questions(tasks)),
            "question_as_query_by_type": by_type,
            "golden_sub_queries": recall(retriever, [q for q, _ in hops], [w for _, w in hops]),
        }
        print(f"quality {backend}: {out[backend]['question_as_query']} {out[backend]['golden_sub_queries']}")
    return out


def tree_rss(process) -> int:
    """Resident bytes of a process and its children (the Anserini indexer is a Java child)."""
    import psutil

    total = 0
    try:
        for member in [process, *process.children(recursive=True)]:
            total += member.memory_info().rss
    except psutil.Error:
        pass
    return total


def timed_build(corpus: Path, backend: str, out: Path, dense: str = "flat") -> dict[str, Any]:
    """``agentenvs index build`` in a child process: wall time and the peak resident memory of its process
    tree, sampled every 50 ms (``ru_maxrss`` would count the benchmark's own memory, inherited at fork).

    Dense and hybrid builds embed the corpus unless its embeddings are cached; ``embedded`` says which."""
    import psutil

    command = [sys.executable, "-m", "agentenvs.cli", "index", "build", "--corpus", str(corpus), "--backend", backend,
               "--dense", dense, "--out", str(out), "--no-progress"]  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        peak = max(peak, tree_rss(watched))
        time.sleep(0.05)
    wall = time.perf_counter() - started
    log = process.stdout.read() if process.stdout else ""
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{log[-2000:]}")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return {"backend": backend, "dense": dense if backend != "bm25" else None, "wall_s": wall,
            "peak_rss_mib": peak / 2**20, "index_mib": size / 2**20}  # fmt: skip


def bench_cost(scratch: Path, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for scale in sizes:
        if scale == 1:
            corpus = default_corpus()
        else:
            subprocess.run([sys.executable, "-m", "agentenvs.tasks.searchqa.generate", "--scale", str(scale),
                            "--out", str(scratch / f"x{scale}")], check=True, capture_output=True)  # fmt: skip
            corpus = scratch / f"x{scale}" / "searchqa" / "corpus.jsonl.gz"
        cache = scratch / f"cache{scale}"
        os.environ["XDG_CACHE_HOME"] = str(cache)  # a cold embedding cache: the first dense build embeds
        for backend, dense in (("bm25", "flat"), ("dense", "flat"), ("dense", "ivf"), ("hybrid", "flat")):
            row = timed_build(corpus, backend, scratch / f"idx-{scale}-{backend}-{dense}", dense)
            row["passages"] = 19960 * scale
            row["embedded"] = backend == "dense" and dense == "flat"
            rows.append(row)
            print(f"cost {row}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("load", "quality", "cost"), action="append", default=None)
    parser.add_argument("--clients", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--per-client", type=int, default=20)
    parser.add_argument("--load-backends", nargs="+", default=["bm25", "dense"], choices=("bm25", "dense", "hybrid"))
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10], help="corpus sizes for cost, x20k")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    parts = args.only or ["load", "quality", "cost"]
    previous = args.results / "searchqa.json"
    result: dict[str, Any] = json.loads(previous.read_text()) if previous.is_file() and args.only else {}
    for key in ("benchmark", "date", "machine"):
        result.pop(key, None)
    with tempfile.TemporaryDirectory(prefix="bench-searchqa-") as scratch:
        scratch = Path(scratch)
        corpus = default_corpus()
        indexes = {}
        for backend in ("bm25", "dense", "hybrid") if "quality" in parts else args.load_backends:
            indexes[backend] = scratch / backend
            build(corpus, backend, indexes[backend], progress=False)
        for part in parts:  # each part is written as it ends, so a stopped run keeps what it measured
            if part == "load":
                result.setdefault("load", {})
                for backend in args.load_backends:
                    result["load"][backend] = bench_load(indexes[backend], backend, args.clients, args.per_client)
                    write_result("searchqa", result, args.results)
            elif part == "quality":
                result["quality"] = bench_quality(indexes)
            else:
                result["cost"] = bench_cost(scratch, args.scales)
            write_result("searchqa", result, args.results)


if __name__ == "__main__":
    main()

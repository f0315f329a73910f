"""The retrieval server: Search-R1's ``POST /retrieve`` over one index folder, plus ``/healthz`` and ``/metrics``.

``{"queries": [...], "topk": k, "return_scores": bool}`` gets ``{"result": [[...], ...]}``, one list per
query: ``{"document": {"id", "contents"}, "score"}`` items with ``return_scores`` (what Search-R1's
trainer sends), bare ``{"id", "contents"}`` documents without, exactly as Search-R1's
``retrieval_server.py`` answers, so its trainers point here unchanged. Concurrent requests are
coalesced (``servers/coalescer.py``); ``batching=False`` searches each request on its own thread, the
design of Search-R1's server, kept for the load benchmark's side-by-side.
"""

from __future__ import annotations

import json
import time
from typing import Any

from flask import Flask, Response, request

from agentenvs.errors import AgentEnvsError, InvalidArgument
from agentenvs.protocol import Unauthorized, error_body
from agentenvs.retrieval.backends import Retriever
from agentenvs.retrieval.corpus import check_queries
from agentenvs.servers.auth import Authenticator
from agentenvs.servers.coalescer import Coalescer
from agentenvs.servers.metrics import HELP, Metrics

DEFAULT_TOPK = 3
MAX_BODY_BYTES = 2 << 20
HELP.update({
    "agentenvs_retriever_queries_total": ("counter", "queries searched"),
    "agentenvs_retriever_batches_total": ("counter", "searches the coalescer made (one per batch)"),
    "agentenvs_retriever_queue_depth": ("gauge", "queries waiting for the searcher"),
})  # fmt: skip


def _answer(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, ensure_ascii=False), status=status, mimetype="application/json", headers=headers)


def parse_request() -> tuple[list[str], int, bool]:
    raw = request.get_data(cache=False)
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidArgument(f"the request body has {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidArgument("the request body is not UTF-8; send JSON encoded as UTF-8") from None
    except ValueError:
        raise InvalidArgument('the request body is not JSON; send {"queries": [...], "topk": 3}') from None
    if not isinstance(body, dict):
        raise InvalidArgument('the request body must be a JSON object: {"queries": [...], "topk": 3}')
    queries, topk = check_queries(body.get("queries"), body.get("topk", DEFAULT_TOPK))
    return queries, topk, bool(body.get("return_scores", False))


def create_app(retriever: Retriever, *, batching: bool = True, tokens: tuple[str, ...] = (), **coalescer: Any) -> Flask:
    app = Flask("agentenvs-retriever")
    metrics = Metrics()
    authenticate = Authenticator(tokens)

    @app.before_request
    def check_token() -> Response | None:
        if not authenticate.required or request.path == "/healthz":
            return None
        try:
            authenticate(request.headers)
        except Unauthorized as exc:
            return _answer(error_body(exc.code, str(exc)), exc.http_status)
        return None

    batcher = Coalescer(retriever, **coalescer) if batching else None
    app.config["coalescer"] = batcher

    @app.post("/retrieve")
    def retrieve() -> Response:
        started = time.perf_counter()
        if batcher is not None:
            batcher.arriving()
        try:
            try:
                queries, topk, scores = parse_request()
            except AgentEnvsError:
                if batcher is not None:
                    batcher.departed()
                raise
            found = batcher.submit(queries, topk) if batcher else retriever.search(queries, topk)
        except AgentEnvsError as exc:
            metrics.inc("agentenvs_errors_total", (("code", exc.code),))
            metrics.inc("agentenvs_requests_total", (("route", "/retrieve"), ("status", str(exc.http_status))))
            retry = {"Retry-After": "1"} if exc.http_status == 429 else None
            return _answer(error_body(exc.code, str(exc)), exc.http_status, retry)
        contents = retriever.corpus.contents
        documents = [[{"id": h.id, "contents": contents[h.id]} for h in hits] for hits in found]
        if scores:
            documents = [
                [{"document": d, "score": h.score} for d, h in zip(row, hits, strict=True)]
                for row, hits in zip(documents, found, strict=True)
            ]
        metrics.inc("agentenvs_retriever_queries_total", by=len(queries))
        metrics.inc("agentenvs_requests_total", (("route", "/retrieve"), ("status", "200")))
        metrics.observe("agentenvs_request_duration_seconds", time.perf_counter() - started, (("route", "/retrieve"),))
        return _answer({"result": documents})

    @app.get("/healthz")
    def healthz() -> Response:
        return _answer(
            {"status": "ok", "backend": retriever.backend, "documents": len(retriever.corpus), "batching": batching}
        )

    @app.get("/metrics")
    def metrics_route() -> Response:
        gauges: dict[str, dict] = {}
        if batcher is not None:
            gauges["agentenvs_retriever_queue_depth"] = {(): float(batcher.pending)}
            gauges["agentenvs_retriever_batches_total"] = {(): float(batcher.batches)}
        return Response(metrics.render(gauges), mimetype="text/plain; version=0.0.4")

    @app.errorhandler(404)
    @app.errorhandler(405)
    def not_found(exc) -> Response:
        return _answer(
            error_body(
                "not_found",
                f"{request.method} {request.path} is not a route; use POST /retrieve, GET /healthz or /metrics",
            ),
            exc.code,
        )

    return app

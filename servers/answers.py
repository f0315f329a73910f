"""What every route answers besides its result: the protocol's JSON errors and the request metrics.

Shared by the flask app (``servers/app.py``) and the ASGI front's step route (``servers/front.py``), so an error or a
request looks the same on ``/metrics`` and on the wire whichever of them served it.
"""

from __future__ import annotations

import logging
import time

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError
from agentenvs.servers.metrics import Metrics

log = logging.getLogger("agentenvs.servers")

Answer = tuple[int, dict[str, str], bytes]
"""An HTTP status, extra headers and a JSON body."""


def error_answer(exc: AgentEnvsError, metrics: Metrics, retry_after_s: int) -> Answer:
    """The protocol error for ``exc``; 401 names the scheme, 429/503 say when to retry."""
    metrics.inc("agentenvs_errors_total", (("code", exc.code),))
    headers = {}
    if exc.http_status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is None and exc.http_status == 503:
        retry_after = retry_after_s
    if retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
    return exc.http_status, headers, protocol.dumps(protocol.error_body(exc.code, str(exc)))


def internal_error_answer(exc: Exception, metrics: Metrics) -> Answer:
    """A bug of the server's own: logged with its traceback, answered as ``internal_error``."""
    log.exception("internal error")
    metrics.inc("agentenvs_errors_total", (("code", "internal_error"),))
    message = f"the server failed: {type(exc).__name__}: {str(exc)[:300]}"
    return 500, {}, protocol.dumps(protocol.error_body("internal_error", message))


def record_request(metrics: Metrics, route: str, status: int, started: float) -> None:
    """Count a served request and observe its duration, labelled ``"<METHOD> <flask rule>"``."""
    labels = (("route", route),)
    metrics.observe("agentenvs_request_duration_seconds", time.perf_counter() - started, labels)
    metrics.inc("agentenvs_requests_total", (*labels, ("status", str(status))))

"""Run the app under waitress: one multi-threaded HTTP process in front of the worker pool.

Sessions live in this one process (the worker pool is its children), so the WSGI server must not fork
copies of the app: waitress serves every connection from one process, keeps idle keep-alive connections in
its event loop instead of a thread each, and runs requests on a thread pool. Errors waitress answers
itself (a body over its hard limit, a broken request line) are given the same JSON error shape.
SIGTERM drains: no new sessions, in-flight requests finish, then sessions and workers close.
"""

from __future__ import annotations

import _thread
import json
import logging
import os
import resource
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import create_server

from agentenvs import protocol
from agentenvs.servers.app import DEFAULT_MAX_REQUEST_BYTES, create_app
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.sessions import ServerConfig, SessionManager

log = logging.getLogger("agentenvs.servers")

TRANSPORT_CODES = {400: "malformed_request", 413: "request_too_large", 431: "malformed_request"}


class _JSONError:
    """A waitress transport error rendered as a protocol error body."""

    def __init__(self, error: Any):
        self.code, self.reason, self.body = error.code, error.reason, error.body

    def to_response(self, ident: str | None = None) -> tuple[str, list[tuple[str, str]], bytes]:
        code = TRANSPORT_CODES.get(self.code, "malformed_request" if self.code < 500 else "internal_error")
        payload = protocol.dumps(protocol.error_body(code, f"{self.reason}: {self.body}"))
        return f"{self.code} {self.reason}", [("Content-Type", "application/json")], payload


class _JSONErrorParser(HTTPRequestParser):
    def received(self, data: bytes) -> int:
        consumed = super().received(data)
        if self.error is not None and not isinstance(self.error, _JSONError):
            self.error = _JSONError(self.error)
        return consumed


class _JSONErrorChannel(HTTPChannel):
    parser_class = _JSONErrorParser


class InFlight:
    """WSGI middleware counting requests being served, so shutdown can wait for them."""

    def __init__(self, app: Any):
        self.app = app
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Any) -> Any:
        with self._lock:
            self.count += 1
        try:
            return self.app(environ, start_response)
        finally:
            with self._lock:
                self.count -= 1


@dataclass
class HTTPConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    threads: int = 32
    connection_limit: int = 4096
    keepalive_timeout_s: int = 120
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    drain_timeout_s: float = 20.0
    port_file: Path | None = None


def raise_fd_limit(wanted: int) -> None:
    """Each connection is a file descriptor; lift the soft limit towards the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted)) if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve(config: ServerConfig, http: HTTPConfig) -> int:
    """Start the workers and the HTTP server; return when SIGTERM or SIGINT stopped them (exit code 0)."""
    raise_fd_limit(http.connection_limit + 256)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # a deep queue under load is expected, not news
    manager = SessionManager(config, Metrics())
    try:
        manager.start()
    except BaseException:
        manager.shutdown()
        raise
    in_flight = InFlight(None)
    in_flight.app = create_app(
        manager, tokens=config.tokens, max_request_bytes=http.max_request_bytes, in_flight=in_flight
    )
    server = create_server(
        in_flight,
        host=http.host,
        port=http.port,
        threads=http.threads,
        connection_limit=http.connection_limit,
        channel_timeout=http.keepalive_timeout_s,
        backlog=min(http.connection_limit, 4096),
        max_request_body_size=4 * http.max_request_bytes,
        asyncore_use_poll=True,
        ident="agentenvs",
        expose_tracebacks=False,
    )
    server.channel_class = _JSONErrorChannel
    port = server.effective_port
    url = f"http://{http.host}:{port}"
    if http.port_file is not None:
        tmp = http.port_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"port": port, "pid": os.getpid(), "url": url}))
        tmp.replace(http.port_file)
    print(
        f"agentenvs serving {sorted(config.envs)} on {url} ({config.workers} workers, "
        f"max {config.max_sessions} sessions, lease {config.lease_ttl_s:g} s, step limit {config.step_timeout_s:g} s"
        f"{', token required' if config.tokens else ''})",
        flush=True,
    )

    def drain() -> None:
        deadline = time.monotonic() + http.drain_timeout_s
        while in_flight.count > 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        _thread.interrupt_main()

    def on_sigterm(signum: int, frame: Any) -> None:
        if not manager.draining:
            manager.draining = True
            print("agentenvs: SIGTERM, draining in-flight requests", flush=True)
            threading.Thread(target=drain, name="drain", daemon=True).start()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        manager.shutdown()
        print("agentenvs: stopped", flush=True)
    return 0

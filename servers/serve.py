"""Run the app under gunicorn: one HTTP process (a ``gthread`` worker, many threads) in front of the worker pool.

Sessions live in that one process (the environment worker pool is its children), so gunicorn runs a
single worker and never recycles it (``max_requests`` 0). The gthread worker keeps connections in an
epoll selector, so many idle keep-alive connections cost nothing per request; waitress rebuilds its poll
set over every connection on each loop turn, which is why it served fewer steps per second at 256
concurrent sessions in ``bench/bench_server_load.py`` (docs/server.md has the numbers).

gunicorn's own error answers (a broken request line, headers too large) get the protocol's JSON error
shape. SIGTERM drains: the listener closes, requests in flight finish, then sessions and workers close.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine, ParseException
from gunicorn.workers.gthread import ThreadWorker

from agentenvs import protocol
from agentenvs.servers.app import DEFAULT_MAX_REQUEST_BYTES, create_app
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.sessions import ServerConfig, SessionManager

log = logging.getLogger("agentenvs.servers")


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
    target = max(soft, wanted) if hard == resource.RLIM_INFINITY else min(hard, max(soft, wanted))
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class JSONErrorWorker(ThreadWorker):
    """gunicorn's gthread worker, answering the errors gunicorn handles itself as protocol JSON errors."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if isinstance(exc, LimitRequestLine):
            status, reason, code = 414, "URI Too Long", "malformed_request"
        elif isinstance(exc, LimitRequestHeaders):
            status, reason, code = 431, "Request Header Fields Too Large", "malformed_request"
        elif isinstance(exc, ParseException):
            status, reason, code = 400, "Bad Request", "malformed_request"
        else:
            self.log.exception("error handling a request")
            status, reason, code = 500, "Internal Server Error", "internal_error"
        body = protocol.dumps(protocol.error_body(code, f"{reason}: {str(exc)[:200] or type(exc).__name__}"))
        head = (
            f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            client.sendall(head.encode("ascii") + body)


class InFlight:
    """WSGI middleware counting requests being served (the ``agentenvs_requests_in_flight`` gauge)."""

    def __init__(self) -> None:
        self.app: Any = None
        self.count = 0

    def __call__(self, environ: dict, start_response: Any) -> Any:
        self.count += 1
        try:
            return self.app(environ, start_response)
        finally:
            self.count -= 1


class AgentEnvsServer(BaseApplication):
    """``agentenvs serve`` as a gunicorn application: configuration from our flags, the app built post-fork."""

    def __init__(self, config: ServerConfig, http: HTTPConfig):
        self.config, self.http = config, http
        self.manager: SessionManager | None = None
        super().__init__()

    def load_config(self) -> None:
        host = f"[{self.http.host}]" if ":" in self.http.host else self.http.host
        settings = {
            "bind": [f"{host}:{self.http.port}"],
            "workers": 1,
            "worker_class": "agentenvs.servers.serve.JSONErrorWorker",
            "threads": self.http.threads,
            "worker_connections": self.http.connection_limit,
            "keepalive": self.http.keepalive_timeout_s,
            "backlog": min(self.http.connection_limit, 4096),
            "timeout": 120,
            "graceful_timeout": int(self.http.drain_timeout_s),
            "max_requests": 0,
            "control_socket_disable": True,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": "warning",
            "proc_name": "agentenvs-serve",
            "when_ready": self._when_ready,
            "worker_exit": self._worker_exit,
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """Runs in the gunicorn worker: start the environment workers, then hand gunicorn the app."""
        raise_fd_limit(self.http.connection_limit + 256)
        self.manager = SessionManager(self.config, Metrics())
        try:
            self.manager.start()
        except BaseException as exc:
            print(f"agentenvs serve: {exc}", flush=True)
            self.manager.shutdown()
            raise
        in_flight = InFlight()
        in_flight.app = create_app(
            self.manager, tokens=self.config.tokens, max_request_bytes=self.http.max_request_bytes, in_flight=in_flight
        )
        return in_flight

    def _when_ready(self, arbiter: Any) -> None:
        port = arbiter.LISTENERS[0].getsockname()[1]
        url = f"http://{self.http.host if ':' not in self.http.host else f'[{self.http.host}]'}:{port}"
        if self.http.port_file is not None:
            tmp = self.http.port_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"port": port, "pid": os.getpid(), "url": url}))
            tmp.replace(self.http.port_file)
        config = self.config
        print(
            f"agentenvs serving {sorted(config.envs)} on {url} ({config.workers} workers, max "
            f"{config.max_sessions} sessions, lease {config.lease_ttl_s:g} s, step limit {config.step_timeout_s:g} s"
            f"{', token required' if config.tokens else ''})",
            flush=True,
        )

    def _worker_exit(self, arbiter: Any, worker: Any) -> None:
        if self.manager is not None:
            self.manager.shutdown()


def serve(config: ServerConfig, http: HTTPConfig) -> int:
    """Serve until SIGTERM or SIGINT; the exit code (0 after a clean stop)."""
    raise_fd_limit(http.connection_limit + 256)
    try:
        AgentEnvsServer(config, http).run()
    except SystemExit as stop:
        return int(stop.code or 0)
    return 0

"""Run the server: one uvicorn process (uvloop, httptools) serving ``servers/front.py`` in front of the worker pool.

Sessions live in that one process (the environment worker pool is its children). The step route is answered on
the event loop or in a thread (``servers/front.py``); the other routes run the flask app in a thread pool. The
event loop keeps every keep-alive connection in one epoll set, so idle connections cost nothing per request.

Transport errors that uvicorn answers itself (a broken request line, a request line or headers over the limits,
a connection over ``--connection-limit``) get the protocol's JSON error shape. SIGTERM drains: the listener
closes, requests in flight finish (up to ``--drain-timeout``), then sessions and workers close and the process
exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agentenvs import protocol
from agentenvs.servers.app import DEFAULT_MAX_REQUEST_BYTES
from agentenvs.servers.front import Front
from agentenvs.servers.metrics import Metrics
from agentenvs.servers.sessions import ServerConfig, SessionManager

MAX_REQUEST_LINE = 8190
MAX_HEADER_BYTES = 32768
REASONS = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


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


class TransportLimit(Exception):
    """A request line or header block over its limit, raised from a parser callback."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JSONErrorProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the protocol's JSON errors, request line and header limits, and a cap
    on open connections."""

    connection_limit = 4096

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self.header_bytes, self.limit_hit = 0, None
        super().connection_made(transport)
        if len(self.connections) > self.connection_limit:
            self._send_error(503, "at_capacity", f"the server holds {self.connection_limit} connections at most")

    def on_message_begin(self) -> None:
        self.header_bytes = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_REQUEST_LINE:
            raise self._over(414, f"the request line is over {MAX_REQUEST_LINE} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > MAX_HEADER_BYTES:
            raise self._over(431, f"the request headers are over {MAX_HEADER_BYTES} bytes")
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        limit = self.parser_error()
        if limit is not None:
            self._send_error(limit.status, "malformed_request", str(limit))
        else:
            self._send_error(400, "malformed_request", f"{msg} Send an HTTP/1.1 request with a JSON body.")

    def parser_error(self) -> TransportLimit | None:
        """The limit a parser callback raised, if that is why the parser failed (httptools wraps it)."""
        cause, self.limit_hit = self.limit_hit, None
        return cause

    def _over(self, status: int, message: str) -> TransportLimit:
        self.limit_hit = TransportLimit(status, message)
        return self.limit_hit

    def _send_error(self, status: int, code: str, message: str) -> None:
        body = protocol.dumps(protocol.error_body(code, message))
        head = (
            f"HTTP/1.1 {status} {REASONS[status]}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        if not self.transport.is_closing():
            self.transport.write(head.encode("ascii") + body)
            self.transport.close()


class AgentEnvsServer(uvicorn.Server):
    """uvicorn's server with the session manager's life cycle: ready line and port file once listening, sessions
    and workers closed after the drain, and a clean exit 0 after SIGTERM."""

    def __init__(self, config: ServerConfig, http: HTTPConfig, front: Front):
        self.agentenvs, self.http, self.front = config, http, front
        protocol_class = type("Protocol", (JSONErrorProtocol,), {"connection_limit": http.connection_limit})
        super().__init__(
            uvicorn.Config(
                front,
                http=protocol_class,
                loop="uvloop",
                lifespan="off",
                interface="asgi3",
                timeout_keep_alive=http.keepalive_timeout_s,
                timeout_graceful_shutdown=int(http.drain_timeout_s),
                backlog=min(http.connection_limit, 4096),
                access_log=False,
                log_level="warning",
                server_header=False,
                proxy_headers=False,
            )
        )

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._announce(sockets[0].getsockname()[1] if sockets else self.http.port)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.front.manager.draining = True
        await super().shutdown(sockets)
        await asyncio.get_running_loop().run_in_executor(None, self._close)
        self._captured_signals.clear()  # drained and closed: exit 0 instead of re-raising SIGTERM

    def _close(self) -> None:
        self.front.close()
        self.front.manager.shutdown()

    def _announce(self, port: int) -> None:
        host = self.http.host if ":" not in self.http.host else f"[{self.http.host}]"
        url = f"http://{host}:{port}"
        if self.http.port_file is not None:
            tmp = self.http.port_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"port": port, "pid": os.getpid(), "url": url}))
            tmp.replace(self.http.port_file)
        config = self.agentenvs
        print(
            f"agentenvs serving {sorted(config.envs)} on {url} ({config.workers} workers, max "
            f"{config.max_sessions} sessions, lease {config.lease_ttl_s:g} s, step limit {config.step_timeout_s:g} s"
            f"{', token required' if config.tokens else ''})",
            flush=True,
        )


def listen(http: HTTPConfig) -> socket.socket:
    """The listening socket, bound before the workers start so a taken port fails fast."""
    family = socket.AF_INET6 if ":" in http.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((http.host, http.port))
    sock.listen(min(http.connection_limit, 4096))
    sock.setblocking(False)
    return sock


def serve(config: ServerConfig, http: HTTPConfig) -> int:
    """Serve until SIGTERM or SIGINT; the exit code (0 after a clean stop)."""
    raise_fd_limit(http.connection_limit + 256)
    try:
        sock = listen(http)
    except OSError as exc:
        print(f"agentenvs serve: cannot listen on {http.host}:{http.port}: {exc}; pick another --port", flush=True)
        return 1
    manager = SessionManager(config, Metrics())
    try:
        manager.start()
    except BaseException as exc:
        print(f"agentenvs serve: {exc}", flush=True)
        manager.shutdown()
        sock.close()
        return 1
    server = AgentEnvsServer(config, http, Front(manager, http.max_request_bytes, http.threads))
    server.run(sockets=[sock])
    return 0

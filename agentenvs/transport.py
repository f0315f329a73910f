"""How the client's calls reach a server: plain ``http.client`` keep-alive connections, or requests.

A rollout driver sends thousands of batch calls a second. requests adds 0.5 to 1 ms to each of them
(preparing the request, hooks, reading a large body in 10 KB chunks), and that fixed cost decides how
much of a server's batch capacity the driver can use (``bench/bench_driver_batch.py``). So a plain
``http://`` server with no proxy in the way is called over ``http.client`` with one keep-alive
connection per thread. An ``https://`` server or one behind a proxy goes through requests, which
verifies certificates against certifi and speaks to proxies. Both raise the same two errors, so the
client's retry rules do not depend on the transport.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class TransportFailed(Exception):
    """No answer came because the connection failed or closed (the call is safe to send again)."""


class TransportTimeout(Exception):
    """The server accepted the call but did not answer within the read timeout."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def payload(self) -> Any:
        """The JSON body, or its text when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body.decode("utf-8", "replace")


def _timeouts(timeout: float | tuple[float, float]) -> tuple[float, float]:
    return (timeout, timeout) if isinstance(timeout, (int, float)) else timeout


class PlainTransport:
    """Keep-alive ``http.client`` connections to one ``http://`` server, one per calling thread."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float | tuple[float, float]):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.headers = headers
        self.connect_s, self.read_s = _timeouts(timeout)
        self._local = threading.local()
        self._open: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.sock is None:  # none yet, or closed by close()
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_s)
            try:
                connection.connect()
            except TimeoutError as exc:
                raise TransportFailed(f"no connection within {self.connect_s} s: {exc}") from None
            except OSError as exc:
                raise TransportFailed(str(exc)) from None
            connection.sock.settimeout(self.read_s)
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.connection = connection
            with self._lock:
                self._open.append(connection)
        return connection

    def _drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()
            with self._lock:
                if connection in self._open:
                    self._open.remove(connection)

    def send(self, method: str, path: str, data: bytes | None, headers: dict[str, str] | None) -> Reply:
        connection = self._connection()
        try:
            connection.request(method, self.prefix + path, body=data, headers=self.headers | (headers or {}))
            response = connection.getresponse()
            body = response.read()
        except TimeoutError as exc:
            self._drop()
            raise TransportTimeout(str(exc) or "timed out") from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise TransportFailed(f"{type(exc).__name__}: {exc}") from None
        if response.will_close:
            self._drop()
        return Reply(response.status, response.headers, body)

    def close(self) -> None:
        with self._lock:
            connections, self._open = self._open, []
        for connection in connections:
            connection.close()


class RequestsTransport:
    """requests, for ``https://`` servers and servers behind a proxy."""

    def __init__(
        self, url: str, headers: dict[str, str], timeout: float | tuple[float, float], proxies: dict, pool_size: int
    ):
        try:
            import requests
        except ImportError as exc:
            from agentenvs.errors import MissingDependency

            raise MissingDependency(
                f"calling {url} (https or through a proxy) needs requests: pip install 'agentenvs[server]'"
            ) from exc
        self.requests = requests
        self.url, self.timeout = url, timeout
        self.http = requests.Session()
        self.http.mount(url, requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0))
        self.http.headers.update(headers)
        self.http.proxies.update(proxies)
        self.http.trust_env = False  # the proxies were read once: with trust_env requests reads os.environ each call

    def send(self, method: str, path: str, data: bytes | None, headers: dict[str, str] | None) -> Reply:
        requests = self.requests
        try:
            answer = self.http.request(method, self.url + path, data=data, headers=headers, timeout=self.timeout)
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise TransportFailed(str(exc)) from None  # a connect timeout is a ConnectionError too: retried
        except requests.Timeout as exc:
            raise TransportTimeout(str(exc)) from None
        return Reply(answer.status_code, answer.headers, answer.content)

    def close(self) -> None:
        self.http.close()


TRANSPORTS = ("auto", "requests")


def transport_for(
    url: str, headers: dict[str, str], timeout: float | tuple[float, float], pool_size: int = 64, kind: str = "auto"
) -> Any:
    """With ``kind="auto"``, the plain transport for an ``http://`` server that no proxy setting applies to,
    requests otherwise; ``"requests"`` always takes requests (the client before the plain transport)."""
    if kind not in TRANSPORTS:
        from agentenvs.errors import InvalidArgument

        raise InvalidArgument(f"transport must be one of {TRANSPORTS}, got {kind!r}")
    proxies = environment_proxies(url)
    if kind == "auto" and url.startswith("http://") and not proxies:
        return PlainTransport(url, headers, timeout)
    return RequestsTransport(url, headers, timeout, proxies, pool_size)


def environment_proxies(url: str) -> dict[str, str]:
    """The proxies the environment (``http_proxy``, ``all_proxy``, ``no_proxy``...) sets for ``url``."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return {}
    scheme = urllib.parse.urlsplit(url).scheme
    return {name: proxy for name, proxy in urllib.request.getproxies().items() if name in (scheme, "all")}

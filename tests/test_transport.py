"""The client's transports on real loopback sockets: which one a URL gets, timeouts, connections per thread."""

from __future__ import annotations

import socket
import threading

import pytest

import agentenvs
from agentenvs.errors import InvalidArgument
from agentenvs.protocol import StepTimeout
from agentenvs.transport import PlainTransport, RequestsTransport, TransportTimeout, transport_for

NO_PROXY = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture
def no_proxy_settings(monkeypatch):
    for name in NO_PROXY:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_plain_http_without_a_proxy_uses_http_client_and_the_rest_requests(no_proxy_settings):
    assert isinstance(transport_for("http://127.0.0.1:8700", {}, 1.0), PlainTransport)
    assert isinstance(transport_for("https://127.0.0.1:8700", {}, 1.0), RequestsTransport)
    no_proxy_settings.setenv("http_proxy", "http://127.0.0.1:3128")
    proxied = transport_for("http://10.1.2.3:8700", {}, 1.0)
    assert isinstance(proxied, RequestsTransport) and proxied.http.proxies["http"] == "http://127.0.0.1:3128"
    no_proxy_settings.setenv("no_proxy", "10.1.2.3")
    assert isinstance(transport_for("http://10.1.2.3:8700", {}, 1.0), PlainTransport)
    assert isinstance(transport_for("http://10.1.2.3:8700", {}, 1.0, kind="requests"), RequestsTransport)
    with pytest.raises(InvalidArgument, match="transport must be one of"):
        transport_for("http://10.1.2.3:8700", {}, 1.0, kind="curl")


class SilentServer:
    """Accepts connections on 127.0.0.1 and reads requests but never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        self.sock.close()
        for connection in self.held:
            connection.close()


def test_a_server_that_never_answers_is_a_step_timeout_not_a_retry(no_proxy_settings):
    silent = SilentServer()
    try:
        transport = PlainTransport(f"http://127.0.0.1:{silent.port}", {}, (1.0, 0.3))
        with pytest.raises(TransportTimeout):
            transport.send("GET", "/healthz", None, None)
        client = agentenvs.connect(f"http://127.0.0.1:{silent.port}", timeout=(1.0, 0.3))
        with pytest.raises(StepTimeout, match="no answer within"):
            client.health()
        client.close()
    finally:
        silent.close()


def test_each_thread_keeps_its_own_connection_and_close_ends_them_all(no_proxy_settings):
    silent = SilentServer()
    try:
        transport = PlainTransport(f"http://127.0.0.1:{silent.port}", {}, 1.0)
        mine = transport._connection()
        assert transport._connection() is mine, "a thread reuses its connection"
        theirs = []
        thread = threading.Thread(target=lambda: theirs.append(transport._connection()))
        thread.start()
        thread.join()
        assert theirs[0] is not mine and len(transport._open) == 2
        transport.close()
        assert mine.sock is None and theirs[0].sock is None and transport._open == []
    finally:
        silent.close()

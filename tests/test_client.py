"""RemoteEnv and EnvPool against real servers on 127.0.0.1: the conformance suite, retries, errors, pools."""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs
from agentenvs import errors, protocol
from agentenvs.servers.launch import ServerProcess, launch_server
from agentenvs.testing import check_text_env

sys.path.insert(0, str(Path(__file__).resolve().parent / "servers"))
from remote_envs_for_tests import PYTHONPATH, SERVE_ARG


def _start(*args: str, workers: int = 1, token: str | None = None) -> ServerProcess:
    return launch_server(["bandit", SERVE_ARG], workers=workers, token=token, extra_args=args, env_vars=PYTHONPATH)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = _start("--keepalive-timeout", "1", "--token", "secret", workers=2)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> agentenvs.Client:
    return agentenvs.connect(server.url, token="secret")


def test_remote_env_passes_the_conformance_suite(client: agentenvs.Client) -> None:
    report = check_text_env(functools.partial(client.make, "bandit"))
    assert not report.failures and "cross_process" in report.passed and "restore" in report.passed


def test_remote_env_is_a_gymnasium_env_with_the_text_env_api(client: agentenvs.Client) -> None:
    env = client.make("bandit")
    try:
        assert isinstance(env, gym.Env)
        local = agentenvs.make("bandit")
        assert env.describe() == local.describe()
        assert env.reset(seed=3) == local.reset(seed=3)
        assert env.step("pull[1]") == local.step("pull[1]")
        response = "I think arm one pays best.\n<action>pull[1]</action>"
        assert env.extract_action(response) == local.extract_action(response)
        assert env.turn == 1 and not env.done
        assert env.step_timeout_s == 60.0, "a busy session is waited out for the server's own step limit"
    finally:
        env.close()
        env.close()


def test_error_answers_become_the_agentenvs_exceptions(client: agentenvs.Client, server: ServerProcess) -> None:
    with pytest.raises(errors.UnknownEnv):
        client.make("no-such-env")
    env = client.make("counter")
    with pytest.raises(errors.ResetNeeded):
        env.step("inc")
    env.reset(seed=0)
    for bad in (b"inc", object(), 3, None):
        with pytest.raises(errors.InvalidActionType):
            env.step(bad)
    with pytest.raises(errors.EnvFailed):
        env.step("fail")
    with pytest.raises(protocol.UnknownSession):
        env.step("inc")
    with pytest.raises(protocol.Unauthorized):
        agentenvs.connect(server.url, token="wrong").make("counter")


def test_think_time_past_the_keepalive_timeout_is_invisible(client: agentenvs.Client) -> None:
    env = client.make("counter")
    try:
        env.reset(seed=0)
        for turn in range(3):
            time.sleep(1.6)
            _observation, reward, *_ = env.step("inc")
            assert reward == 1.0 and env.turn == turn + 1
    finally:
        env.close()


class DroppingProxy:
    """A loopback TCP proxy that, when armed, swallows one answer and drops the client's connection."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pump, args=(downstream, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self.armed.is_set():
                    self.armed.clear()
                    self.dropped += 1
                    break
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


def test_a_step_retried_after_a_lost_answer_does_not_step_twice(server: ServerProcess) -> None:
    proxy = DroppingProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        client = agentenvs.connect(f"http://127.0.0.1:{proxy.port}", token="secret")
        env = client.make("counter")
        env.reset(seed=0)
        proxy.armed.set()
        _, reward, _, _, info = env.step("inc")
        assert proxy.dropped == 1, "the proxy should have swallowed the first answer"
        assert reward == 1.0 and info["turn"] == 1
        assert client.request("GET", env.path)["turn"] == 1, "the server must have stepped exactly once"
        assert env.get_state()["actions"] == ["inc"]
        env.close()
    finally:
        proxy.close()


def _opened(client: agentenvs.Client) -> float:
    """``agentenvs_sessions_opened_total`` of the counter env on the client's server."""
    for line in client.request("GET", "/metrics").splitlines():
        if line.startswith('agentenvs_sessions_opened_total{env="counter"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_create_retried_after_a_lost_answer_opens_one_session(server: ServerProcess) -> None:
    """The client's idempotency key makes the retry answer the session the lost answer carried: no orphan."""
    proxy = DroppingProxy(int(server.url.rsplit(":", 1)[1]))
    direct = agentenvs.connect(server.url, token="secret")
    try:
        client = agentenvs.connect(f"http://127.0.0.1:{proxy.port}", token="secret")
        before = _opened(direct)
        proxy.armed.set()
        env = client.make("counter")
        assert proxy.dropped == 1, "the proxy should have swallowed the first answer"
        assert _opened(direct) == before + 1, "the retried create must not open a second session"
        env.reset(seed=0)
        assert env.step("inc")[1] == 1.0
        assert direct.request("GET", env.path)["turn"] == 1
        env.close()
    finally:
        proxy.close()
        direct.close()


def test_env_pool_spreads_sessions_and_falls_over_at_capacity() -> None:
    small, large = _start("--max-sessions", "1"), _start()
    try:
        with agentenvs.EnvPool([small.url, large.url]) as pool:
            envs = pool.make_many("counter", 3)
            assert pool.load() == {small.url: 1, large.url: 2}, "one server is full after one session"
            for env in envs:
                env.reset(seed=1)
                assert env.step("inc")[1] == 1.0
            assert len(pool) == 3
        for process in (small, large):
            assert agentenvs.connect(process.url).health()["sessions"] == 0, "close() must close every session"
        with agentenvs.EnvPool([large.url, small.url], strategy="round_robin") as pool:
            pool.make_many("counter", 2)
            assert pool.load() == {large.url: 1, small.url: 1}
            with pytest.raises(protocol.AtCapacity) as caught:
                agentenvs.connect(small.url).make("counter")
            assert caught.value.retry_after and caught.value.retry_after >= 1
    finally:
        small.stop()
        large.stop()


def test_env_pool_rejects_bad_arguments() -> None:
    with pytest.raises(errors.InvalidArgument):
        agentenvs.EnvPool([])
    with pytest.raises(errors.InvalidArgument):
        agentenvs.EnvPool(["http://127.0.0.1:9"], strategy="random")


def test_an_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(protocol.ServerUnreachable, match="is the server up"):
        agentenvs.connect(f"http://127.0.0.1:{port}", retries=1).make("bandit")

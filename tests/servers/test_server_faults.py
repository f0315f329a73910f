"""Faults on real servers: dying workers, failing and slow engines, leases, the session cap, SIGTERM."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import psutil
import pytest
from conftest import Api, error_of, start

from agentenvs.servers.launch import ServerProcess


@pytest.fixture(scope="module")
def faulty() -> Iterator[ServerProcess]:
    process = start(
        args=("--step-timeout", "1.5", "--max-sessions", "64", "--probe-interval", "0.25", "--probe-timeout", "2")
    )
    try:
        yield process
    finally:
        process.stop()


def _wait_for_replacement(server: ServerProcess, victim: int) -> None:
    """Until ``victim`` is gone and two workers take sessions (a replacement is ready once it answers)."""
    api = Api(server.url)
    for _ in range(400):
        if victim not in _live_worker_pids(server) and api.call("GET", "/readyz").json()["workers_ready"] == 2:
            return
        time.sleep(0.05)
    raise AssertionError("the dead worker was not replaced")


def _both_ready(api: Api) -> None:
    for _ in range(400):
        if api.call("GET", "/readyz").json()["workers_ready"] == 2:
            return
        time.sleep(0.02)
    raise AssertionError("both workers should take sessions")


def _sessions_by_worker(api: Api, count: int) -> dict[int, list[str]]:
    by_pid: dict[int, list[str]] = {}
    for _ in range(count):  # each open after both workers answer heartbeats (a busy new one may be late)
        _both_ready(api)
        session = api.open()
        api.reset(session)
        pid = api.call("GET", f"/v1/sessions/{session}").json()["worker_pid"]
        by_pid.setdefault(pid, []).append(session)
    assert len(by_pid) == 2, "sessions should be spread over both workers"
    return by_pid


@pytest.mark.parametrize("how", ["sigkill", "crash_action"])
def test_a_dead_worker_fails_only_its_own_sessions_and_is_replaced(faulty: ServerProcess, how: str) -> None:
    api = Api(faulty.url)
    by_pid = _sessions_by_worker(api, 6)
    victim, survivor = sorted(by_pid)
    if how == "sigkill":
        os.kill(victim, signal.SIGKILL)
    else:
        crashed = api.step(by_pid[victim][0], "crash", 0)
        assert crashed.status_code == 500 and error_of(crashed)["code"] == "worker_lost"
        by_pid[victim] = by_pid[victim][1:]
    _wait_for_replacement(faulty, victim)
    for session in by_pid[victim]:
        failed = api.step(session, "inc", 0)
        assert failed.status_code == 500, failed.text
        assert error_of(failed)["code"] == "worker_lost" and "died" in error_of(failed)["message"]
        assert api.step(session, "inc", 0).status_code == 404, "the failed session must be closed"
    for session in by_pid[survivor]:
        assert api.step(session, "inc", 0).status_code == 200
    fresh = api.open()
    api.reset(fresh)
    assert api.step(fresh, "inc", 0).status_code == 200


def test_an_engine_exception_closes_only_that_session(faulty: ServerProcess) -> None:
    api = Api(faulty.url)
    broken, neighbour = api.open(), api.open()
    api.reset(broken)
    api.reset(neighbour)
    failed = api.step(broken, "fail", 0)
    assert failed.status_code == 500 and "RuntimeError" in error_of(failed)["message"]
    assert api.step(broken, "inc", 0).status_code == 404
    assert api.step(neighbour, "inc", 0).status_code == 200


def test_a_step_past_the_limit_is_504_and_the_server_keeps_serving(faulty: ServerProcess) -> None:
    api = Api(faulty.url)
    slow, other = api.open(), api.open()
    api.reset(slow)
    api.reset(other)
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(Api(faulty.url).step(slow, "sleep 3", 0)))
    thread.start()
    try:
        time.sleep(0.2)
        assert api.healthy()
        assert api.step(other, "inc", 0).status_code == 200, "a slow step must not hold up other sessions"
        assert thread.is_alive(), "the slow step answered before the checks ran"
    finally:
        thread.join()
    assert answers[0].status_code == 504 and error_of(answers[0])["code"] == "step_timeout"
    assert api.step(slow, "inc", 0).status_code == 404, "a timed-out session is closed"


def test_a_wedged_worker_is_killed_and_replaced(faulty: ServerProcess) -> None:
    api = Api(faulty.url)
    by_pid = _sessions_by_worker(api, 6)
    victim = max(by_pid, key=lambda pid: len(by_pid[pid]))
    wedged, neighbour = by_pid[victim][:2]
    answer = api.step(wedged, "wedge", 0)
    assert answer.status_code == 504 and error_of(answer)["code"] == "step_timeout"
    for _ in range(400):
        if victim not in _live_worker_pids(faulty):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the wedged worker was not killed")
    _wait_for_replacement(faulty, victim)
    failed = api.step(neighbour, "inc", 0)
    assert failed.status_code == 500 and error_of(failed)["code"] == "worker_lost"
    assert "answered no heartbeat" in error_of(failed)["message"]
    fresh = api.open()
    api.reset(fresh)
    assert api.step(fresh, "inc", 0).status_code == 200


def _live_worker_pids(server: ServerProcess) -> set[int]:
    return {p.pid for p in psutil.Process(server.pid).children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


def test_lease_expiry_and_the_session_cap() -> None:
    tight = start(workers=1, args=("--lease-ttl", "1", "--max-sessions", "2", "--retry-after", "7"))
    try:
        api = Api(tight.url)
        first, second = api.open(), api.open()
        full = api.call("POST", "/v1/sessions", {"env": "counter"})
        assert full.status_code == 429 and error_of(full)["code"] == "at_capacity"
        assert full.headers["Retry-After"] == "7", "Retry-After comes from the server's --retry-after"
        api.call("DELETE", f"/v1/sessions/{second}")
        kept = api.open()
        api.reset(kept)
        for _ in range(6):
            time.sleep(0.5)
            api.step(kept, "inc", api.call("GET", f"/v1/sessions/{kept}").json()["turn"])
        assert api.call("GET", f"/v1/sessions/{kept}").status_code == 200, "a used session keeps its lease"
        expired = api.call("POST", f"/v1/sessions/{first}/reset", {})
        assert expired.status_code == 404 and "expired" in error_of(expired)["message"]
    finally:
        tight.stop()


def test_sigterm_drains_in_flight_requests_then_exits_cleanly() -> None:
    server = start(workers=1)
    api = Api(server.url)
    children = psutil.Process(server.pid).children(recursive=True)
    assert children, "the worker processes should be children of the server"
    session = api.open()
    api.reset(session)
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(Api(server.url).step(session, "sleep 1", 0)))
    thread.start()
    time.sleep(0.3)
    server.process.send_signal(signal.SIGTERM)
    thread.join()
    assert answers[0].status_code == 200, "the in-flight step must finish during the drain"
    assert server.process.wait(20) == 0
    server.stop()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"processes left after shutdown: {[p.cmdline() for p in alive]}"

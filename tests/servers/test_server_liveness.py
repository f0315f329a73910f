"""Liveness under calls that never return: each fault with 2 workers, new sessions kept off the hung worker.

Each test starts its own server, makes one worker hang (a step past its limit on every thread, a constructor
that hangs, a worker that stops answering heartbeats, a stopped ScienceWorld JVM, a ShellOps command whose
limit failed) while a prober opens, resets, steps and closes fresh sessions, and checks: the prober's
sessions keep working on the healthy worker, the hung worker is replaced and its sessions fail with
``worker_lost``, and nothing leaks (``/metrics`` sessions, slots and busy worker threads back to zero, no
process left of the replaced worker). Each prints what it measured (``pytest -s``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest
from conftest import Api, error_of, start
from remote_envs_for_tests import PYTHONPATH

from agentenvs.servers.launch import ServerProcess, launch_server

INTERVAL_S = 0.25
PROBING = ("--probe-interval", str(INTERVAL_S), "--probe-timeout", "2")


def metrics(api: Api) -> dict[str, float]:
    """The ``/metrics`` samples by name with labels, e.g. ``agentenvs_workers_killed_total{reason="stuck"}``."""
    samples = {}
    for line in api.call("GET", "/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> float:
    """Poll ``check`` until true; the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"{what} within {timeout:g} s")


def _running(process: psutil.Process, but: str = "\0") -> bool:
    """Whether ``process`` runs (not a zombie, not gone) and its command line does not hold ``but``."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE and but not in " ".join(process.cmdline())
    except psutil.Error:
        return False


def descendants(pid: int) -> list[psutil.Process]:
    """The running descendants of ``pid``."""
    return [p for p in psutil.Process(pid).children(recursive=True) if _running(p)]


def engine_processes(server: ServerProcess) -> set[int]:
    """The server's descendants but multiprocessing's resource tracker: its workers and what they started."""
    return {p.pid for p in psutil.Process(server.pid).children(recursive=True) if _running(p, "resource_tracker")}


def live_workers(server: ServerProcess) -> set[int]:
    return {p.pid for p in psutil.Process(server.pid).children() if p.pid in engine_processes(server)}


def worker_of(api: Api, session: str) -> int:
    return api.call("GET", f"/v1/sessions/{session}").json()["worker_pid"]


@dataclass
class Try:
    started: float
    ended: float
    error: str | None


@dataclass
class Prober:
    """Threads that open, reset, step and close fresh sessions in a loop, recording every try."""

    url: str
    env: str = "counter"
    reset: dict[str, Any] = field(default_factory=lambda: {"seed": 0})
    action: str = "inc"
    threads: int = 2
    tries: list[Try] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.threads)]

    def __enter__(self) -> Prober:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def _loop(self) -> None:
        api = Api(self.url)
        while not self._stop.is_set():
            started = time.monotonic()
            self.tries.append(Try(started, time.monotonic(), self._try(api)))
            self.tries[-1].ended = time.monotonic()

    def _try(self, api: Api) -> str | None:
        opened = api.call("POST", "/v1/sessions", {"env": self.env})
        if opened.status_code != 201:
            return error_of(opened)["code"]
        session = opened.json()["session_id"]
        try:
            for path, body in (("reset", self.reset), ("step", {"action": self.action, "turn": 0})):
                answer = api.call("POST", f"/v1/sessions/{session}/{path}", body)
                if answer.status_code != 200:
                    return error_of(answer)["code"]
            return None
        finally:
            api.call("DELETE", f"/v1/sessions/{session}")

    def after(self, moment: float) -> list[Try]:
        return [t for t in self.tries if t.started >= moment]

    def report(self, name: str, fault_at: float) -> dict[str, Any]:
        """What the prober saw of the sessions it opened from ``fault_at`` on (tries, failures, when new sessions
        worked again), and how many of its tries under way at the fault failed (those on the hung worker)."""
        tries = self.after(fault_at)
        failed = [t for t in tries if t.error is not None]
        ok = [t for t in tries if t.error is None]
        caught = [t for t in self.tries if t.started < fault_at < t.ended and t.error is not None]
        summary = {
            "tries": len(tries),
            "tries_caught_by_the_fault_failed": len(caught),
            "failed": sorted({t.error for t in failed}),
            "failures": len(failed),
            "last_failed_try_started_s": max((t.started - fault_at for t in failed), default=None),
            "first_success_after_s": min((t.ended - fault_at for t in ok), default=None),
        }
        print(f"\nLIVENESS {name}: {summary}")
        return summary


def assert_nothing_leaked(api: Api, server: ServerProcess) -> None:
    """Every session closed: no session, slot, busy or overdue call left; two ready workers and nothing else."""
    wanted = {
        "agentenvs_worker_sessions": 0.0,
        "agentenvs_calls_in_flight": 0.0,
        "agentenvs_calls_overdue": 0.0,
        "agentenvs_workers_suspect": 0.0,
        "agentenvs_workers_ready": 2.0,
    }

    def gauges() -> dict[str, float]:
        now = metrics(api)
        return {k: v for k, v in now.items() if k in wanted or k.startswith("agentenvs_sessions_active")}

    def clean() -> bool:
        now = gauges()
        active = sum(v for k, v in now.items() if k.startswith("agentenvs_sessions_active"))
        processes = engine_processes(server)
        return active == 0 and all(now.get(k) == v for k, v in wanted.items()) and processes == live_workers(server)

    wait_for(clean, "sessions, slots, calls and engine processes gone")
    assert len(live_workers(server)) == 2, gauges()


def _both_ready(api: Api) -> None:
    wait_for(lambda: api.call("GET", "/readyz").json()["workers_ready"] == 2, "both workers taking sessions")


def sessions_by_worker(api: Api, count: int) -> dict[int, list[str]]:
    by_pid: dict[int, list[str]] = {}
    for _ in range(count):  # each open after both workers answer heartbeats (a busy new one may be late)
        _both_ready(api)
        session = api.open()
        api.reset(session)
        by_pid.setdefault(worker_of(api, session), []).append(session)
    assert len(by_pid) == 2, "sessions should be spread over both workers"
    return by_pid


def in_background(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers


def test_steps_past_their_limit_on_every_thread_get_their_worker_replaced() -> None:
    """Two threads per worker; one hung step on the single-step route and one in a batch fill the victim."""
    server = start(args=("--worker-threads", "2", "--step-timeout", "1", *PROBING))
    try:
        api = Api(server.url)
        by_pid = sessions_by_worker(api, 6)
        victim, healthy = sorted(by_pid)
        hung, hung_in_batch, neighbour = by_pid[victim]
        bystander = by_pid[healthy][0]
        fault_at = time.monotonic()
        single, single_answer = in_background(lambda: Api(server.url).step(hung, "sleep 3600", 0))
        batch_body = {"steps": [
            {"session_id": hung_in_batch, "action": "sleep 3600", "turn": 0},
            {"session_id": bystander, "action": "inc", "turn": 0},
        ]}  # fmt: skip
        batch, batch_answer = in_background(lambda: Api(server.url).call("POST", "/v1/batch/step", batch_body))
        wait_for(lambda: metrics(api)["agentenvs_calls_in_flight"] >= 2, "both hung calls in flight")
        with Prober(server.url) as prober:
            single.join(30)
            batch.join(30)
            assert single_answer[0].status_code == 504 and error_of(single_answer[0])["code"] == "step_timeout"
            hung_item, bystander_item = batch_answer[0].json()["results"]
            assert hung_item["error"]["code"] == "step_timeout" and bystander_item["reward"] == 1.0
            deleted_at = time.monotonic()
            assert api.call("DELETE", f"/v1/sessions/{hung}").status_code == 204
            assert time.monotonic() - deleted_at < 1.0, "closing a timed-out session must not wait on its call"
            replaced_s = wait_for(lambda: victim not in live_workers(server), "the stuck worker killed")
            lost = api.step(neighbour, "inc", 0)
            assert lost.status_code == 500 and error_of(lost)["code"] == "worker_lost"
            assert "threads are held by calls past their time limit" in error_of(lost)["message"]
            assert api.step(bystander, "inc", 1).status_code == 200
            wait_for(lambda: api.call("GET", "/readyz").json()["workers_ready"] == 2, "the replacement ready")
        seen = prober.report("step past its limit", fault_at)
        print(f"LIVENESS step past its limit: victim killed {replaced_s:.2f} s after the 504s")
        assert seen["failures"] == 0 and seen["tries"] > 0, prober.tries
        assert metrics(api)['agentenvs_workers_killed_total{reason="stuck"}'] == 1
        for session in [*by_pid[healthy], hung_in_batch, neighbour]:
            api.call("DELETE", f"/v1/sessions/{session}")
        assert_nothing_leaked(api, server)
    finally:
        server.stop()


def test_a_timed_out_session_closes_at_once_and_is_freed_when_its_call_returns() -> None:
    server = start(args=("--worker-threads", "4", "--step-timeout", "0.5", *PROBING))
    try:
        api = Api(server.url)
        session = api.open()
        api.reset(session)
        pid = worker_of(api, session)
        answer = api.step(session, "sleep 3", 0)
        assert answer.status_code == 504
        deleted_at = time.monotonic()
        assert api.call("DELETE", f"/v1/sessions/{session}").status_code == 204
        assert time.monotonic() - deleted_at < 1.0, "DELETE must not wait on the hung call"
        held = metrics(api)
        assert held["agentenvs_calls_overdue"] == 1 and held["agentenvs_worker_sessions"] == 1, held
        assert api.step(session, "inc", 0).status_code == 404
        wait_for(lambda: metrics(api)["agentenvs_calls_overdue"] == 0, "the overdue call returned", timeout=10)
        assert_nothing_leaked(api, server)
        assert pid in live_workers(server), "one overdue call of four threads does not replace a worker"
        assert not any(name.startswith("agentenvs_workers_killed_total") for name in metrics(api))
    finally:
        server.stop()


def test_a_constructor_that_hangs_gets_its_worker_replaced() -> None:
    server = start(args=("--worker-threads", "1", "--setup-timeout", "1", *PROBING))
    try:
        api = Api(server.url)
        first = api.open()
        victim = worker_of(api, first)
        api.call("DELETE", f"/v1/sessions/{first}")  # the next session goes where this one was
        fault_at = time.monotonic()
        body = {"env": "counter", "kwargs": {"slow_start_s": 3600}}
        hung, hung_answer = in_background(lambda: Api(server.url).call("POST", "/v1/sessions", body))
        wait_for(lambda: metrics(api)["agentenvs_calls_in_flight"] >= 1, "the hanging constructor in flight")
        with Prober(server.url) as prober:
            hung.join(30)
            assert hung_answer[0].status_code == 504 and error_of(hung_answer[0])["code"] == "step_timeout"
            wait_for(lambda: victim not in live_workers(server), "the stuck worker killed")
            wait_for(lambda: api.call("GET", "/readyz").json()["workers_ready"] == 2, "the replacement ready")
        seen = prober.report("constructor that hangs", fault_at)
        assert seen["failures"] == 0 and seen["tries"] > 0, prober.tries
        assert metrics(api)['agentenvs_workers_killed_total{reason="stuck"}'] == 1
        assert_nothing_leaked(api, server)
    finally:
        server.stop()


def test_a_worker_that_stops_answering_heartbeats_is_replaced() -> None:
    server = start(args=("--worker-threads", "2", *PROBING))
    victim = 0
    try:
        api = Api(server.url)
        stranded, other = api.open(), api.open()
        api.reset(stranded)
        api.reset(other)
        victim = worker_of(api, stranded)  # both hold one session: the next one would go to the victim
        with Prober(server.url) as prober:
            time.sleep(0.5)
            fault_at = time.monotonic()
            os.kill(victim, signal.SIGSTOP)
            replaced_s = wait_for(lambda: victim not in live_workers(server), "the silent worker killed")
            lost = api.step(stranded, "inc", 0)
            assert lost.status_code == 500 and error_of(lost)["code"] == "worker_lost"
            assert "answered no heartbeat" in error_of(lost)["message"]
            assert api.step(other, "inc", 0).status_code == 200
            wait_for(lambda: api.call("GET", "/readyz").json()["workers_ready"] == 2, "the replacement ready")
            time.sleep(0.5)
        seen = prober.report("worker that stops answering", fault_at)
        print(f"LIVENESS worker that stops answering: killed {replaced_s:.2f} s after SIGSTOP")
        assert set(seen["failed"]) <= {"worker_lost"}, prober.tries
        if seen["failures"]:  # only sessions sent before the worker was late may land on it
            assert seen["last_failed_try_started_s"] <= 2 * INTERVAL_S + 0.5, seen
        assert any(t.error is None and t.ended < fault_at + replaced_s for t in prober.after(fault_at)), (
            "new sessions must work on the healthy worker before the silent one is even replaced"
        )
        assert metrics(api)['agentenvs_workers_killed_total{reason="heartbeat"}'] == 1
        api.call("DELETE", f"/v1/sessions/{other}")
        assert_nothing_leaked(api, server)
    finally:
        if victim and psutil.pid_exists(victim):
            os.kill(victim, signal.SIGCONT)
        server.stop()


def _hang_a_real_engine(
    server: ServerProcess, env: str, reset: dict[str, Any], action: str, hang: Callable[[int], dict[str, Any]]
) -> tuple[list[psutil.Process], list[str]]:
    """Open a session of ``env``, make it hang (``hang(worker_pid)`` prepares and gives the step that hangs),
    check that its worker is replaced while new sessions work on the other one; the replaced worker's processes
    while it hung, and their names."""
    api = Api(server.url)
    session = api.open(env)
    assert api.call("POST", f"/v1/sessions/{session}/reset", reset).status_code == 200
    victim = worker_of(api, session)
    body = hang(victim)
    fault_at = time.monotonic()
    step, answer = in_background(lambda: Api(server.url).call("POST", f"/v1/sessions/{session}/step", body))
    wait_for(lambda: metrics(api)["agentenvs_calls_in_flight"] >= 1, "the hung step in flight")
    time.sleep(0.5)  # the engine is at work on it (a command started)
    engine = descendants(victim)
    names = [p.name() for p in engine]
    with Prober(server.url, env=env, reset=reset, action=action, threads=1) as prober:
        step.join(60)
        assert answer[0].status_code == 504 and error_of(answer[0])["code"] == "step_timeout"
        answered_at = time.monotonic()
        replaced_s = wait_for(lambda: victim not in live_workers(server), "the stuck worker killed")
        print(f"\nLIVENESS {env} engine that hangs: 504 after {answered_at - fault_at:.2f} s, worker killed "
              f"{replaced_s:.2f} s after the 504")  # fmt: skip
        wait_for(lambda: api.call("GET", "/readyz").json()["workers_ready"] == 2, "the replacement ready", 120)
        wait_for(lambda: len(prober.after(fault_at)) > 0, "a new session of the engine", 120)
    seen = prober.report(f"{env} engine that hangs", fault_at)
    assert seen["failures"] == 0 and seen["tries"] > 0, prober.tries
    assert_nothing_leaked(api, server)
    return engine, names


@pytest.mark.slow
def test_a_stopped_sciworld_jvm_gets_its_worker_replaced_and_dies_with_it() -> None:
    pytest.importorskip("scienceworld", reason="needs pip install 'agentenvs[sciworld]'")
    from agentenvs.envs.sciworld.jvm import find_orphan_jvms

    def stop_the_jvm(worker: int) -> dict[str, Any]:
        (jvm,) = [p for p in descendants(worker) if p.name() == "java"]
        os.kill(jvm.pid, signal.SIGSTOP)  # the next py4j call waits on its socket for good
        return {"action": "look around", "turn": 0}

    args = ("--worker-threads", "1", "--step-timeout", "5", *PROBING)
    server = launch_server(["sciworld"], workers=2, extra_args=args, timeout=120)
    try:
        engine, names = _hang_a_real_engine(server, "sciworld", {"seed": 0}, "look around", stop_the_jvm)
        assert "java" in names, names
        _, alive = psutil.wait_procs(engine, timeout=10)
        assert not alive, f"the stopped JVM outlived its worker: {alive}"
        assert not find_orphan_jvms(), "no ScienceWorld JVM may be left without its worker"
    finally:
        server.stop()


@pytest.mark.slow
def test_a_shellops_command_past_a_failed_limit_gets_its_worker_replaced_and_dies_with_it() -> None:
    from unlimited_shellops_for_tests import NAME, SERVE_ARG

    reset = {"seed": 0, "options": {"split": "demo", "task_id": "inventory-count-py-files"}}

    def sleep_for_an_hour(worker: int) -> dict[str, Any]:
        return {"action": "<bash>sleep 3600</bash>", "turn": 0}

    args = ("--worker-threads", "1", "--step-timeout", "2", *PROBING)
    server = launch_server([SERVE_ARG], workers=2, extra_args=args, env_vars=PYTHONPATH, timeout=120)
    try:
        engine, names = _hang_a_real_engine(server, NAME, reset, "<bash>echo ok</bash>", sleep_for_an_hour)
        assert "bwrap" in names and "sleep" in names, names
        _, alive = psutil.wait_procs(engine, timeout=10)
        assert not alive, f"the sandbox outlived its worker: {alive}"
    finally:
        server.stop()

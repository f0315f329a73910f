"""Load on one server: 64, 256 and 1024 concurrent bandit sessions, a fixed number of steps each.

Reports steps/s, step latency p50/p99, errors by kind, clean 429s, and server memory (RSS of the HTTP
process and its workers). The load generator is a lean asyncio HTTP/1.1 keep-alive client (one
connection per session, hand-written requests) because on 2 shared cores it must cost far less CPU than
the server it measures; ``requests`` in hundreds of threads would not. A second phase uses the real
``RemoteEnv`` with clients that think longer than the server's keep-alive timeout between steps.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil
from bench_server_overhead import start_waitress
from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

import agentenvs
from agentenvs.servers.launch import launch_server


class Connection:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
        if self.writer is None:
            await self.open()
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(data)}\r\n"
        if data:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + data)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        payload = await self.reader.readexactly(length) if length else b""
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, (json.loads(payload) if payload else None), headers

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.writer = None


@dataclass
class LoadResult:
    step_latencies: list[float] = field(default_factory=list)
    opened: int = 0
    refused_429: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    steps_wall_s: float = 0.0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def run_sessions(url: str, sessions: int, steps: int, env: str = "bandit", think_s: float = 0.0) -> LoadResult:
    """Open ``sessions`` sessions at once, then each takes ``steps`` steps concurrently (resetting at episode end)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    result = LoadResult()
    connections = [Connection(host, int(port)) for _ in range(sessions)]
    opened: list[tuple[Connection, str]] = []

    async def open_one(connection: Connection) -> None:
        try:
            status, body, headers = await connection.call("POST", "/v1/sessions", {"env": env})
        except (OSError, asyncio.IncompleteReadError) as exc:
            result.error(f"open:{type(exc).__name__}")
            return
        if status == 201:
            opened.append((connection, body["session_id"]))
        elif status == 429 and body["error"]["code"] == "at_capacity" and "retry-after" in headers:
            result.refused_429 += 1
        else:
            result.error(f"open:{status}")

    await asyncio.gather(*(open_one(c) for c in connections))
    result.opened = len(opened)

    async def reset(connection: Connection, session_id: str, index: int) -> None:
        status, _, _ = await connection.call("POST", f"/v1/sessions/{session_id}/reset", {"seed": index})
        if status != 200:
            result.error(f"reset:{status}")

    await asyncio.gather(*(reset(c, sid, i) for i, (c, sid) in enumerate(opened)))

    async def drive(connection: Connection, session_id: str, index: int) -> None:
        path = f"/v1/sessions/{session_id}"
        try:
            turn = 0
            for _ in range(steps):
                if think_s:
                    await asyncio.sleep(think_s)
                started = time.perf_counter()
                status, body, _ = await connection.call("POST", path + "/step", {"action": "pull[0]", "turn": turn})
                result.step_latencies.append(time.perf_counter() - started)
                if status != 200:
                    result.error(f"step:{status}:{body['error']['code']}")
                    return
                turn += 1
                if body["terminated"] or body["truncated"]:
                    await connection.call("POST", path + "/reset", {"seed": index + turn})
                    turn = 0
        except (OSError, asyncio.IncompleteReadError) as exc:
            result.error(f"step:{type(exc).__name__}")

    started = time.perf_counter()
    await asyncio.gather(*(drive(c, sid, i) for i, (c, sid) in enumerate(opened)))
    result.steps_wall_s = time.perf_counter() - started
    await asyncio.gather(*(c.call("DELETE", f"/v1/sessions/{sid}") for c, sid in opened), return_exceptions=True)
    await asyncio.gather(*(c.close() for c in connections))
    return result


class MemorySampler:
    """Peak RSS of the server process tree, sampled in the background."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def tree(self) -> list[psutil.Process]:
        return [self.root, *self.root.children(recursive=True)]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) used so far by the server and its workers."""
        total = 0.0
        for process in self.tree():
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    def rss(self) -> int:
        total = 0
        for process in [self.root, *self.root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def load_phase(url: str, pid: int, sessions: int, steps: int) -> dict[str, Any]:
    sampler = MemorySampler(pid)
    idle_rss = sampler.rss()
    load_before = os.getloadavg()
    server_cpu, client_cpu = sampler.cpu_s(), time.process_time()
    result = asyncio.run(run_sessions(url, sessions, steps))
    server_cpu, client_cpu = sampler.cpu_s() - server_cpu, time.process_time() - client_cpu
    peak = sampler.stop()
    requests = len(result.step_latencies) + 3 * result.opened + result.refused_429
    latency = summarize(result.step_latencies) if result.step_latencies else {}
    return {
        "sessions_requested": sessions,
        "sessions_opened": result.opened,
        "clean_429": result.refused_429,
        "steps": len(result.step_latencies),
        "steps_per_s": len(result.step_latencies) / result.steps_wall_s if result.steps_wall_s else 0.0,
        "p50_ms": latency.get("median_ms"),
        "p99_ms": latency.get("p99_ms"),
        "errors": result.errors,
        "server_cpu_ms_per_request": 1000 * server_cpu / requests if requests else None,
        "client_cpu_ms_per_request": 1000 * client_cpu / requests if requests else None,
        "server_rss_mib_before": idle_rss / 2**20,
        "server_rss_mib_peak": peak / 2**20,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }


def think_phase(sessions: int, think_s: float, steps: int, keepalive_s: int) -> dict[str, Any]:
    """Real RemoteEnvs that sleep past the server's keep-alive timeout between steps must see no errors."""
    errors: list[str] = []
    done = [0]
    with launch_server(["bandit"], workers=2, extra_args=["--keepalive-timeout", str(keepalive_s)]) as server:
        client = agentenvs.connect(server.url)

        def player(index: int) -> None:
            try:
                env = client.make("bandit")
                env.reset(seed=index)
                for _ in range(steps):
                    time.sleep(think_s)
                    env.step("pull[0]")
                    done[0] += 1
                env.close()
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=player, args=(i,)) for i in range(sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return {
        "sessions": sessions,
        "think_s": think_s,
        "server_keepalive_timeout_s": keepalive_s,
        "steps": done[0],
        "errors": len(errors),
        "error_examples": errors[:3],
    }


def compare_fronts(server: Any, sessions: int, steps: int, rounds: int = 2) -> dict[str, Any] | None:
    """The same load through ``agentenvs serve`` (uvicorn, servers/front.py) and the flask app under waitress."""
    waitress = start_waitress()
    if waitress is None:
        return None
    process, url = waitress
    fronts = {"agentenvs_serve": server.url, "waitress": url}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in fronts}
    try:
        for _ in range(rounds):
            for name, front in fronts.items():
                result = asyncio.run(run_sessions(front, sessions, steps))
                latency = summarize(result.step_latencies)
                runs[name].append(
                    {
                        "steps_per_s": len(result.step_latencies) / result.steps_wall_s,
                        "p50_ms": latency["median_ms"],
                        "p99_ms": latency["p99_ms"],
                        "errors": result.errors,
                        "loadavg": os.getloadavg(),
                    }
                )
    finally:
        process.terminate()
        process.wait(20)
    return {"sessions": sessions, "steps_per_session": steps, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--steps", type=int, default=20, help="steps per session")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-sessions", type=int, default=512)
    parser.add_argument("--compare-waitress", type=int, default=256, help="sessions for the WSGI comparison (0: skip)")
    args = parser.parse_args()
    phases = []
    with launch_server(
        ["bandit"], workers=args.workers, extra_args=["--max-sessions", str(args.max_sessions)]
    ) as server:
        for sessions in args.sessions:
            phase = load_phase(server.url, server.pid, sessions, args.steps)
            print(json.dumps(phase), flush=True)
            phases.append(phase)
        comparison = compare_fronts(server, args.compare_waitress, args.steps) if args.compare_waitress else None
    think = think_phase(sessions=32, think_s=3.0, steps=3, keepalive_s=2)
    write_result(
        "server_load",
        {
            "command": "python bench/bench_server_load.py "
            + " ".join(
                ["--sessions", *map(str, args.sessions), "--steps", str(args.steps), "--workers", str(args.workers)]
            ),
            "server": {
                "workers": args.workers,
                "max_sessions": args.max_sessions,
                "http": "uvicorn (uvloop, httptools), servers/front.py; 32 threads",
            },
            "load": phases,
            "think_time": think,
            "wsgi_comparison": comparison,
            "targets": "256: zero errors, >= 1100 steps/s, p99 < 350 ms; 1024: only clean 429s",
            "note": "the load generator shares the server's cores",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

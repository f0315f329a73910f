"""Our server against the peers' design (FastAPI + uvicorn, environments in the server process), one driver.

Measured as a new user would: one asyncio keep-alive HTTP/1.1 driver pinned to core 0, each server pinned to
core 1 (its worker processes inherit the pin), both servers up at once and stepped in interleaved turns so
machine load hits them alike. Every phase opens fresh sessions, resets them, and times only the steps:

* 1 client: step latency p50/p99 (the per-step overhead a single rollout sees);
* 64 and 256 clients x 50 steps: steps/s over the phase's wall time, latency p50/p99, errors;
* memory: the unique memory (USS) of each server's process tree, idle and with 256 sessions open.

Writes ``bench/results/server_peer.json`` with medians over repetitions and the ratios ours / peer.
Needs the bench extra (``make bench`` installs fastapi and uvicorn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

HERE = Path(__file__).resolve().parent
DRIVER_CORE, SERVER_CORE = 0, 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol: JSON in, JSON out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, f"127.0.0.1:{port}")

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return await self.request("POST", path, body)

    async def request(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        self.writer.write(head.encode() + payload)
        header = await self.reader.readuntil(b"\r\n\r\n")
        status = int(header[9:12])
        length = 0
        for line in header.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        answer = await self.reader.readexactly(length) if length else b""
        return status, json.loads(answer) if answer else None

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@dataclass
class Contender:
    """A server under test: how to open, reset, step and close one session on it."""

    name: str
    port: int
    process: subprocess.Popen
    ours: bool

    async def open(self, conn: Connection, seed: int) -> Any:
        status, answer = await conn.post("/v1/sessions" if self.ours else "/create", {"env": "bandit"})
        if status not in (200, 201):
            raise RuntimeError(f"{self.name}: create answered {status}: {answer}")
        session = answer["session_id"] if self.ours else answer["id"]
        await self.reset(conn, session, seed)
        return session

    async def reset(self, conn: Connection, session: Any, seed: int) -> None:
        path, body = (f"/v1/sessions/{session}/reset", {"seed": seed}) if self.ours else ("/reset", {"id": session})
        if not self.ours:
            body["seed"] = seed
        status, answer = await conn.post(path, body)
        if status != 200:
            raise RuntimeError(f"{self.name}: reset answered {status}: {answer}")

    async def step(self, conn: Connection, session: Any, turn: int) -> tuple[int, bool]:
        """Status and whether the episode ended."""
        if self.ours:
            status, answer = await conn.post(f"/v1/sessions/{session}/step", {"action": "pull[1]", "turn": turn})
            return status, status == 200 and (answer["terminated"] or answer["truncated"])
        status, answer = await conn.post("/step", {"id": session, "action": "pull[1]"})
        return status, status == 200 and answer["done"]

    async def close(self, conn: Connection, session: Any) -> None:
        """Close the session, so the next phase starts with an empty server."""
        if self.ours:
            await conn.request("DELETE", f"/v1/sessions/{session}", None)
        else:
            await conn.request("POST", "/close", {"id": session})

    def memory_mib(self) -> float:
        """Unique memory of the server process and its children, in MiB."""
        root = psutil.Process(self.process.pid)
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                total += proc.memory_full_info().uss
            except psutil.Error:
                continue
        return total / 2**20


@dataclass
class Phase:
    clients: int
    steps: int
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0


async def run_phase(contender: Contender, phase: Phase, seed: int, hold: list | None = None) -> Phase:
    """``phase.clients`` connections, each opening a session and taking ``phase.steps`` timed steps."""
    conns = [await Connection.open(contender.port) for _ in range(phase.clients)]
    sessions = [await contender.open(conn, seed + i) for i, conn in enumerate(conns)]
    start = asyncio.Event()

    async def client(conn: Connection, session: Any, index: int) -> None:
        await start.wait()
        turn, episode = 0, 0
        for _ in range(phase.steps):
            began = time.perf_counter()
            try:
                status, done = await contender.step(conn, session, turn)
            except (asyncio.IncompleteReadError, ConnectionError):
                phase.errors += 1  # the server dropped the connection: an error, and the client goes on
                conns[index] = conn = await Connection.open(contender.port)
                continue
            phase.latencies.append(time.perf_counter() - began)
            turn += 1
            if status != 200:
                phase.errors += 1
            if done:
                episode += 1
                await contender.reset(conn, session, seed + index + 1000 * episode)
                turn = 0

    tasks = [asyncio.create_task(client(c, s, i)) for i, (c, s) in enumerate(zip(conns, sessions, strict=True))]
    began = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    phase.wall_s = time.perf_counter() - began
    if hold is not None:
        hold.append(contender.memory_mib())
    for conn, session in zip(conns, sessions, strict=True):
        await contender.close(conn, session)
        await conn.close()
    return phase


def start(name: str, command: list[str], port: int, ours: bool) -> Contender:
    process = subprocess.Popen(command, preexec_fn=lambda: os.sched_setaffinity(0, {SERVER_CORE}))
    url = f"http://127.0.0.1:{port}/healthz"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return Contender(name, port, process, ours)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{name} did not become healthy: {' '.join(command)}")


def start_servers(workers: int, extra: list[str]) -> list[Contender]:
    ours_port, peer_port = free_port(), free_port()
    ours_cmd = [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "bandit", "--host", "127.0.0.1"]
    ours_cmd += ["--port", str(ours_port), "--workers", str(workers), *extra]
    peer_cmd = [sys.executable, str(HERE / "peer_server.py"), "--env", "bandit", "--port", str(peer_port)]
    return [start("ours", ours_cmd, ours_port, True), start("peer", peer_cmd, peer_port, False)]


def measure(contenders: list[Contender], reps: int, single_steps: int) -> dict[str, dict[str, list]]:
    """Every phase of every repetition, the contenders in turns (their order alternating by repetition)."""
    runs: dict[str, dict[str, list]] = {c.name: {} for c in contenders}
    for rep in range(reps):
        order = contenders if rep % 2 == 0 else contenders[::-1]
        for clients, steps in ((1, single_steps), (64, 50), (256, 50)):
            for contender in order:
                hold: list[float] = [contender.memory_mib()] if clients == 256 else []
                phase = asyncio.run(run_phase(contender, Phase(clients, steps), seed=rep * 7919, hold=hold or None))
                stats = summarize(phase.latencies)
                record = {
                    "steps_per_s": len(phase.latencies) / phase.wall_s,
                    "p50_ms": stats["median_ms"],
                    "p99_ms": stats["p99_ms"],
                    "errors": phase.errors,
                }
                if hold:
                    record["memory_idle_mib"], record["memory_256_mib"] = hold
                runs[contender.name].setdefault(f"c{clients}", []).append(record)
                print(contender.name, clients, {k: round(v, 3) for k, v in record.items()}, flush=True)
    return runs


def medians(records: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in records) for key in records[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument("--single-steps", type=int, default=1000, help="steps of the 1-client phase")
    parser.add_argument("--workers", type=int, default=2, help="our server's --workers (default 2, its default)")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra `agentenvs serve` argument")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("needs 2 cores: the driver pins itself to one and the servers to the other")
        return 2
    contenders = start_servers(args.workers, args.serve_arg)
    os.sched_setaffinity(0, {DRIVER_CORE})
    try:
        runs = measure(contenders, args.reps, args.single_steps)
    finally:
        for contender in contenders:
            contender.process.terminate()
            contender.process.wait(30)
    summary = {name: {phase: medians(recs) for phase, recs in by_phase.items()} for name, by_phase in runs.items()}
    ours, peer = summary["ours"], summary["peer"]
    ratios = {
        "c1_p50_speed": peer["c1"]["p50_ms"] / ours["c1"]["p50_ms"],
        "c64_steps_per_s": ours["c64"]["steps_per_s"] / peer["c64"]["steps_per_s"],
        "c256_steps_per_s": ours["c256"]["steps_per_s"] / peer["c256"]["steps_per_s"],
    }
    per_session = {
        name: (s["c256"]["memory_256_mib"] - s["c256"]["memory_idle_mib"]) / 256 * 1024 for name, s in summary.items()
    }
    result = {
        "setup": {"reps": args.reps, "workers": args.workers, "serve_args": args.serve_arg, "env": "bandit"},
        "median": summary,
        "ratios_ours_over_peer": ratios,
        "memory_per_session_kib": per_session,
        "runs": runs,
    }
    write_result("server_peer", result)
    print(json.dumps({"ratios": ratios, "memory_per_session_kib": per_session}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A Ray cluster of several nodes on one machine, kept off the network, for tests and benchmarks.

Ray binds its ports on every interface whatever ``--node-ip-address`` says, so the only way to keep a
test cluster on loopback is a private network namespace: :func:`private_network_command` wraps a
command in ``unshare --net`` (``unshare -rn`` when not root) with ``lo`` up, and everything started
inside (the nodes and the driver) sees only 127.0.0.1. :class:`LocalCluster` starts a head and worker
nodes with ``ray start --block`` and token authentication, and can kill one node's processes to test
what a lost node does.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentenvs.errors import AgentEnvsError


def private_network_command(argv: list[str]) -> list[str] | None:
    """``argv`` run in a new network namespace with only loopback, or None where this machine cannot."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        return None
    inner = f"{ip} link set lo up && exec " + shlex.join(argv)
    for flags in (["--net"], ["--user", "--map-root-user", "--net"]):
        probe = subprocess.run([unshare, *flags, ip, "link", "set", "lo", "up"], capture_output=True)
        if probe.returncode == 0:
            return [unshare, *flags, "sh", "-c", inner]
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalCluster:
    """A head and ``workers`` worker nodes on this machine (run it inside :func:`private_network_command`)."""

    def __init__(self, workers: int = 1, *, cpus_per_node: int = 1, resources: dict[str, float] | None = None):
        self.workers, self.cpus_per_node, self.resources = workers, cpus_per_node, resources or {}
        self.root = Path(tempfile.mkdtemp(prefix="agentenvs-raycluster-"))
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        self.env = os.environ | {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            "RAY_TMPDIR": str(self.root / "tmp"),
            # a node that stops answering is declared dead after about 3 s (Ray's default: about 15 s)
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_timeout_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
        }
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen] = []

    def _ray_start(self, *args: str) -> subprocess.Popen:
        ray = str(Path(sys.executable).with_name("ray"))
        command = [ray, "start", "--block", "--disable-usage-stats", f"--num-cpus={self.cpus_per_node}"]
        command += [f"--resources={json.dumps(self.resources)}", *args]
        log = open(self.root / f"node{len(self.nodes)}.log", "wb")  # noqa: SIM115 (the node outlives this call)
        return subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout_s: float = 120.0) -> LocalCluster:
        """Start the nodes and wait until Ray counts them all alive."""
        os.environ.update({k: self.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR")})
        head_args = ["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.root / 'tmp'}"]
        self.nodes.append(self._ray_start(*head_args))
        self._wait_for(1, timeout_s)
        for _ in range(self.workers):
            self.nodes.append(self._ray_start(f"--address={self.address}"))
        self._wait_for(1 + self.workers, timeout_s)
        return self

    def alive_nodes(self) -> int:
        """Nodes the head counts alive, asked from a separate driver so the caller's Ray is left alone."""
        probe = "import ray; ray.init(address=%r, logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))"
        answer = subprocess.run(
            [sys.executable, "-c", probe % self.address], env=self.env, capture_output=True, text=True, timeout=120
        )
        try:
            return int(answer.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    def _wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(node.poll() is not None for node in self.nodes):
                raise AgentEnvsError(f"a Ray node exited while starting; see the logs in {self.root}")
            if self._gcs_up() and self.alive_nodes() >= count:
                return
            time.sleep(0.5)
        raise AgentEnvsError(f"{count} Ray node(s) did not come up within {timeout_s:g} s; see {self.root}")

    def _gcs_up(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def kill_node(self, index: int) -> None:
        """SIGKILL node ``index`` and every process under it (raylet, workers, actors): a lost machine."""
        _signal_tree(self.nodes[index].pid, signal.SIGKILL)
        self.nodes[index].wait(10)

    def stop(self) -> None:
        """Stop every node of this cluster and wait until all their processes are gone (only this
        cluster's: ``ray stop`` would kill any Ray on the machine)."""
        import psutil

        processes = [p for node in reversed(self.nodes) if node.poll() is None for p in _signal_tree(node.pid, 0)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        _, alive = psutil.wait_procs(processes, timeout=20)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(alive, timeout=5)
        for node in self.nodes:
            node.wait(5)
        _kill_leftovers(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _signal_tree(pid: int, signum: int) -> list:
    """Send ``signum`` (0: none) to ``pid`` and all its descendants; the processes, for waiting on."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for process in processes if signum else ():
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signum)
    return processes


def _kill_leftovers(root: Path) -> None:
    """Kill what still runs from this cluster's folder once every node is stopped."""
    import psutil

    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(str(root) in part for part in process.info["cmdline"] or []):
                process.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue

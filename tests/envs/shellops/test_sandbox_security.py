"""The shellops sandbox holds: after each attack the host is unchanged, the server is up, no process is left."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from agentenvs.envs.shellops import sandbox
from agentenvs.envs.shellops.sandbox import Limits, SandboxUnavailable, Shell, run_once
from agentenvs.envs.shellops.snapshot import SnapshotError, pack, unpack
from agentenvs.envs.shellops.workspace import Workspace, processes_of

LIMITS = Limits(command_timeout_s=3.0, cpu_s=5, memory_mb=512, file_mb=4, processes=32, workspace_mb=16)


@pytest.fixture
def server():
    """A host service on loopback standing in for the environment server."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.sendall(b"up")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def host_state(secret: Path) -> str:
    """What must not change on the host: a secret file and what lies in the test's folder."""
    return hashlib.sha256(secret.read_bytes() + repr(sorted(os.listdir(secret.parent))).encode()).hexdigest()


def tmp_entries_of(uid: int, before: set[str]) -> list[str]:
    """Entries the sandbox's host uid put in the host's /tmp since ``before``.

    Other processes on the machine (test workers, a JVM) may write to /tmp meanwhile: only what the
    sandbox's own uid owns is the sandbox's doing."""
    found = []
    for name in set(os.listdir("/tmp")) - before:
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(f"/tmp/{name}").st_uid == uid:
                found.append(name)
    return found


@pytest.fixture
def shell(tmp_path, server):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    before, tmp_before = host_state(secret), set(os.listdir("/tmp"))
    workspace = Workspace(LIMITS.workspace_mb, LIMITS.workspace_inodes)
    box = Shell(workspace, LIMITS)
    box.secret, box.port = secret, server
    yield box
    box.close()
    assert workspace.close() == [], "processes outlived the sandbox"
    assert processes_of(workspace.uid) == []
    assert host_state(secret) == before, "the host changed"
    assert tmp_entries_of(workspace.uid, tmp_before) == [], "the sandbox wrote to the host's /tmp"
    with socket.create_connection(("127.0.0.1", server), timeout=2) as connection:
        assert connection.recv(2) == b"up", "the server is down"


def ok(box: Shell, command: str) -> str:
    result = box.run(command)
    assert result.exit_code == 0, (command, result)
    return result.stdout.decode()


def test_network_egress_and_host_loopback_are_cut(shell):
    port = shell.port
    probe = "import socket; socket.create_connection(('{}', {}), timeout=2); print('connected')"
    for host, target_port in (("127.0.0.1", port), ("192.0.2.2", 80), ("1.1.1.1", 443)):
        result = shell.run(f'python3 -c "{probe.format(host, target_port)}"')
        assert result.exit_code != 0 and b"connected" not in result.stdout, (host, result)
    assert shell.run("getent hosts pypi.org").exit_code != 0
    assert "lo" in ok(shell, "cat /proc/net/dev") and "eth" not in ok(shell, "cat /proc/net/dev")


def test_host_files_outside_the_binds_are_invisible(shell):
    for path in ("/etc/shadow", "/root", str(shell.secret), "/home", "/work", "/var", os.path.expanduser("~")):
        assert shell.run(f"ls -d {path} || cat {path}").exit_code != 0, path
    assert ok(shell, "env | sort").split("\n")[:1] != ["host"]
    assert "secret" not in ok(shell, "env")


def test_nothing_outside_the_workspace_is_writable(shell):
    for path in ("/usr/evil", "/etc/evil", "/evil", "/bin/evil", str(shell.secret)):
        assert shell.run(f"echo x > {path}").exit_code != 0, path
    ok(shell, "echo inside > /tmp/marker-shellops && touch /workspace/kept")
    assert not Path("/tmp/marker-shellops").exists(), "the sandbox's /tmp is the host's"
    assert (shell.workspace.path / "kept").exists()


def test_a_fork_bomb_is_bounded_and_killed(shell):
    result = shell.run("bomb() { bomb | bomb & }; bomb; sleep 2; echo done")
    assert result.timed_out or result.exit_code is not None
    assert ok(shell, "echo alive").strip() == "alive"


def test_memory_and_disk_are_bounded(shell):
    result = shell.run("python3 -c 'bytearray(2 << 30)'")
    assert result.exit_code != 0 and b"MemoryError" in result.stderr
    assert shell.run("head -c 8M /dev/zero > big").exit_code != 0
    assert os.path.getsize(shell.workspace.path / "big") == LIMITS.file_mb << 20
    shell.run("for i in 1 2 3 4 5 6; do head -c 3M /dev/zero > f$i; done")
    stats = os.statvfs(shell.workspace.path)
    assert (stats.f_blocks - stats.f_bavail) * stats.f_frsize <= LIMITS.workspace_mb << 20
    assert shell.run("for i in $(seq 20000); do : > n$i || exit 1; done").exit_code != 0, "no inode limit"


def test_a_runaway_loop_times_out_and_the_shell_restarts_with_the_workspace_kept(shell):
    ok(shell, "echo kept > note; cd /tmp; X=1")
    result = shell.run("while :; do :; done")
    assert result.timed_out and result.exit_code is None
    assert ok(shell, 'cat /workspace/note; echo "[$X]"; pwd') == "kept\n[]\n/workspace\n"
    assert shell.restarts == 1


def test_processes_do_not_outlive_the_episode(shell):
    ok(shell, "(sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 & disown -a; true")
    assert len(processes_of(shell.workspace.uid)) >= 4


def test_signals_cannot_reach_the_server(shell):
    assert shell.run(f"kill -9 {os.getpid()}").exit_code != 0
    shell.run("kill -9 -1; kill -9 1")
    assert ok(shell, "echo alive").strip() == "alive"


def test_proc_and_sys_tricks_fail(shell):
    assert shell.run("ls /sys/kernel").exit_code != 0
    assert shell.run("echo 1 > /proc/sys/kernel/sysrq").exit_code != 0
    assert "bwrap" in ok(shell, "cat /proc/1/comm")
    assert len(ok(shell, "ls -d /proc/[0-9]*").split()) < 10, "host processes are visible"
    assert shell.run(f"cat /proc/{os.getpid()}/environ").exit_code != 0
    assert "CapEff:\t0000000000000000" in ok(shell, "cat /proc/self/status")
    assert shell.run("unshare -U true").exit_code != 0, "a nested user namespace was allowed"


def test_output_is_capped(shell):
    result = shell.run("yes | head -c 1000000")
    assert result.truncated and len(result.stdout) == LIMITS.output_bytes


def test_a_verifier_sandbox_sees_the_workspace_read_only(shell):
    ok(shell, "echo 42 > answer")
    result = run_once(shell.workspace, "cat answer; echo x > answer", LIMITS)
    assert result.stdout == b"42\n" and result.exit_code != 0
    assert (shell.workspace.path / "answer").read_text() == "42\n"


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member, content in members:
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, target
    return member, b""


@pytest.mark.parametrize(
    "members",
    [
        [(tarfile.TarInfo("/etc/evil"), b"x")],
        [(tarfile.TarInfo("a/../../evil"), b"x")],
        [_link("out", "/etc")],
        [_link("a/out", "../../etc")],
        [_link("hard", "../etc/passwd", tarfile.LNKTYPE)],
        [_link("dir", "."), (tarfile.TarInfo("dir/../../evil"), b"x")],
    ],
    ids=["absolute", "dotdot", "symlink-absolute", "symlink-up", "hardlink-up", "through-link"],
)
def test_unsafe_snapshots_are_refused_whole(tmp_path, members):
    before = sorted(os.listdir(tmp_path.parent))
    dest = tmp_path / "ws"
    dest.mkdir()
    with pytest.raises(SnapshotError):
        unpack(_tar(members), dest, os.getuid())
    assert os.listdir(dest) == [] and sorted(os.listdir(tmp_path.parent)) == before


def test_a_link_inside_the_workspace_is_kept_and_a_write_through_a_link_is_refused(tmp_path):
    dest = tmp_path / "ws"
    dest.mkdir()
    unpack(_tar([(tarfile.TarInfo("a/f"), b"x"), _link("a/g", "f")]), dest, os.getuid())
    assert (dest / "a" / "g").read_bytes() == b"x"
    other = tmp_path / "ws2"
    other.mkdir()
    with pytest.raises(SnapshotError):
        unpack(_tar([_link("d", "."), (tarfile.TarInfo("d/f"), b"x")]), other, os.getuid())


def test_pack_is_deterministic_and_checksummed(tmp_path):
    first, second = pack({"b": b"2", "a/x": b"1"}), pack({"a/x": b"1", "b": b"2"})
    assert first == second
    with pytest.raises(SnapshotError):
        unpack(first, tmp_path, os.getuid(), expected_sha256="0" * 64)


def test_the_sandbox_refuses_to_start_when_bwrap_cannot_run(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool: None)
    sandbox._probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match=r"bwrap.*not found.*never runs commands unsandboxed"):
            sandbox.require_sandbox()
    finally:
        sandbox._probe.cache_clear()


def test_every_rlimit_is_in_force(shell):
    limits = ok(shell, "ulimit -t; ulimit -v; ulimit -f; ulimit -n; ulimit -u").split()
    assert limits == [str(LIMITS.cpu_s), str(LIMITS.memory_mb << 10), str((LIMITS.file_mb << 20) // 1024),
                      str(LIMITS.open_files), str(LIMITS.processes)]  # fmt: skip
    opened = shell.run("python3 -c \"[open('/dev/null') for _ in range(300)]\"")
    assert opened.exit_code != 0 and b"Too many open files" in opened.stderr

"""The bubblewrap sandbox: one persistent shell per episode, and one-shot sandboxes for verifiers.

Every sandbox gets no network (an empty network namespace), a read-only system (``/usr`` and a few
files of ``/etc``), nothing of the host's home, secrets or other sessions, a writable ``/workspace``
(the episode's tmpfs, ``workspace.Workspace``), new pid/ipc/uts/user namespaces, ``--die-with-parent``
and rlimits on CPU time, address space, file size, open files and processes (per leased uid). A
command runs with a wall-clock limit; past it the whole sandbox is killed (its pid namespace takes
every process with it) and a new shell is started on the same workspace. Output is capped. When
bubblewrap cannot run, :func:`require_sandbox` raises :class:`SandboxUnavailable`; nothing ever runs
unsandboxed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentenvs.envs.shellops.workspace import ROOT, Workspace
from agentenvs.errors import MissingDependency

PATH = "/usr/local/bin:/usr/bin:/bin"


class SandboxUnavailable(MissingDependency):
    """bubblewrap cannot run here (not installed, not root, or user namespaces disabled)."""


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; every number is a hard limit."""

    command_timeout_s: float = 10.0
    cpu_s: int = 20
    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 256
    processes: int = 64
    workspace_mb: int = 64
    workspace_inodes: int = 8192
    tmp_mb: int = 16
    output_bytes: int = 8192


@dataclass(frozen=True)
class Result:
    """One command's outcome; ``exit_code`` is None when it timed out."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False
    restarted: bool = False
    cwd: str = "/workspace"


def _etc_files() -> Path:
    folder = ROOT / "etc"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "passwd").write_text("agent:x:1000:1000::/workspace:/bin/bash\n", encoding="utf-8")
    (folder / "group").write_text("agent:x:1000:\n", encoding="utf-8")
    return folder


SYSTEM_BINDS = ("/usr", "/etc/alternatives", "/etc/ld.so.cache")
"""The host paths every sandbox binds read-only (besides its own workspace and passwd/group files)."""


def command_line(
    workspace: Workspace, limits: Limits, argv: list[str], writable: bool = True, mount: str = "/workspace"
) -> list[str]:
    """prlimit (as root) then setpriv to the leased uid then bwrap: the full launch line.

    The workspace is bound at ``mount`` and is the working folder, except for a verifier's copy (any
    other ``mount``), whose checks start in the sandbox's private ``/tmp``."""
    etc = _etc_files()
    rlimits = [
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_mb << 20}",
        f"--fsize={limits.file_mb << 20}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",
        "--core=0",
    ]
    uid = str(workspace.uid)
    home = "/workspace" if mount == "/workspace" else "/tmp"
    system = [arg for path in SYSTEM_BINDS for arg in ("--ro-bind", path, path)]
    bwrap = [
        "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
        "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
        *system, "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group",
        "--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
        "--bind" if writable else "--ro-bind", str(workspace.path), mount, "--remount-ro", "/",
        "--chdir", home,
        "--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", home, "--setenv", "LANG", "C.UTF-8",
        "--setenv", "TZ", "UTC", "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--cap-drop", "ALL",
    ]  # fmt: skip
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return ["prlimit", *rlimits, *setpriv, *bwrap, *argv]


def exposing_bind(path: Path) -> str | None:
    """The system bind under which ``path`` (links resolved) is readable in every sandbox, or None."""
    real = os.path.realpath(path)
    for source in SYSTEM_BINDS:
        bound = os.path.realpath(source)
        if real == bound or real.startswith(bound.rstrip("/") + "/"):
            return source
    return None


class AnswersReadable(MissingDependency):
    """The task panels (verifiers, reference solutions) lie under a path every sandbox can read."""


def require_unreadable(folder: Path) -> None:
    """Raise :class:`AnswersReadable` when ``folder`` lies under a path the sandbox binds."""
    bind = exposing_bind(folder)
    if bind is not None:
        raise AnswersReadable(
            f"shellops refuses to start: its panels ({folder}: verifiers and reference solutions) lie under "
            f"{bind}, which every sandbox binds read-only, so an agent could read the answers. Install agentenvs "
            "outside /usr, in a virtual environment (python3 -m venv /opt/agentenvs && /opt/agentenvs/bin/pip "
            "install 'agentenvs[shellops]', or `make install` in a checkout), not system-wide"
        )


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """Why no sandbox can run here, or None when one just ran ``true``."""
    if os.geteuid() != 0:
        return "the shellops sandbox needs root (a leased uid per sandbox and a size-limited tmpfs workspace)"
    missing = [tool for tool in ("bwrap", "prlimit", "setpriv") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found: install bubblewrap and util-linux (apt-get install bubblewrap)"
    workspace = Workspace(1, 64)
    try:
        done = subprocess.run(command_line(workspace, Limits(), ["true"]), capture_output=True, timeout=30)
    finally:
        workspace.close()
    if done.returncode != 0:
        return f"bwrap failed (exit {done.returncode}): {done.stderr.decode(errors='replace').strip()}"
    return None


def require_sandbox() -> None:
    """Raise :class:`SandboxUnavailable`, saying why, unless a bubblewrap sandbox runs here."""
    why = _probe()
    if why is not None:
        raise SandboxUnavailable(f"shellops cannot start: {why}; it never runs commands unsandboxed")


class _Capture:
    """The first ``limit`` bytes of a stream, and whether more came."""

    def __init__(self, limit: int) -> None:
        self.limit, self.data, self.truncated = limit, bytearray(), False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[: max(room, 0)]
        self.truncated |= len(chunk) > room


def _kill(process: subprocess.Popen) -> None:
    """Kill the sandbox: bwrap's death takes its pid namespace, and so every process in it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


class Shell:
    """A persistent bash in a sandbox over ``workspace``: ``cd`` and variables carry from command to command."""

    def __init__(self, workspace: Workspace, limits: Limits = Limits()) -> None:
        require_sandbox()
        self.workspace, self.limits = workspace, limits
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        read_end, self._status_fd = os.pipe()
        argv = ["bash", "--noprofile", "--norc"]
        self.process = subprocess.Popen(
            command_line(self.workspace, self.limits, argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(self._status_fd,),
            start_new_session=True,
        )
        os.close(self._status_fd)
        self._status = read_end
        for stream in (self.process.stdout, self.process.stderr):
            os.set_blocking(stream.fileno(), False)
        ready = self._exchange("true", self.limits.command_timeout_s + 20)
        if ready.exit_code != 0:
            raise SandboxUnavailable(f"the sandboxed shell did not start: {ready.stderr.decode(errors='replace')}")

    def _restart(self) -> None:
        self._stop()
        self.restarts += 1
        self._start()

    def _stop(self) -> None:
        if self.process is not None:
            _kill(self.process)
            os.close(self._status)
            self.process = None

    def run(self, command: str) -> Result:
        """Run ``command`` in the shell; on timeout or when the shell exits, a new shell takes over."""
        result = self._exchange(command, self.limits.command_timeout_s)
        if result.timed_out or result.restarted:
            self._restart()
        return result

    def _exchange(self, command: str, timeout_s: float) -> Result:
        nonce = secrets.token_hex(8)
        fd = self._status_fd
        script = (
            f". /dev/stdin {fd}>&- <<'AE_{nonce}'\n{command.replace(chr(0), '')}\nAE_{nonce}\n"
            f'printf \'%s %s %s\\0\' "$?" {nonce} "$PWD" >&{fd}\n'
        )
        out, err = _Capture(self.limits.output_bytes), _Capture(self.limits.output_bytes)
        try:
            self.process.stdin.write(script.encode("utf-8", "surrogateescape"))
            self.process.stdin.flush()
        except BrokenPipeError:
            return Result(None, b"", b"the shell had exited", restarted=True)
        status = self._collect(out, err, time.monotonic() + timeout_s)
        truncated = out.truncated or err.truncated
        if status is None:
            return Result(None, bytes(out.data), bytes(err.data), timed_out=True, truncated=truncated)
        if not status:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=1)
            code = self.process.poll()
            return Result(code, bytes(out.data), bytes(err.data), truncated=truncated, restarted=True)
        code, seen, cwd = status.split(" ", 2)
        assert seen == nonce, "the status line does not carry this command's nonce"
        return Result(int(code), bytes(out.data), bytes(err.data), truncated=truncated, cwd=cwd)

    def _collect(self, out: _Capture, err: _Capture, deadline: float) -> str | None:
        """Read output until the status line ('' when the shell died, None past the deadline)."""
        streams = {self.process.stdout.fileno(): out, self.process.stderr.fileno(): err}
        status = b""
        with selectors.DefaultSelector() as selector:
            for fd in (*streams, self._status):
                selector.register(fd, selectors.EVENT_READ)
            while b"\0" not in status:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if key.fd == self._status:
                        if not chunk:
                            self._drain(streams)
                            return ""
                        status += chunk
                    elif chunk:
                        streams[key.fd].add(chunk)
                    else:
                        selector.unregister(key.fd)
        self._drain(streams)
        return status.split(b"\0")[0].decode("utf-8", "replace")

    @staticmethod
    def _drain(streams: dict[int, _Capture]) -> None:
        for fd, capture in streams.items():
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(fd, 65536):
                    capture.add(chunk)

    def close(self) -> None:
        self._stop()


def run_once(workspace: Workspace, command: str, limits: Limits = Limits(), writable: bool = False) -> Result:
    """``bash -c command`` in a fresh sandbox over ``workspace`` (read-only unless ``writable``)."""
    argv = ["bash", "--noprofile", "--norc", "-c", command.replace("\0", "")]
    return _run_to_end(command_line(workspace, limits, argv, writable), limits)


def run_over_copy(copy: Workspace, mount: str, argv: list[str], limits: Limits = Limits()) -> Result:
    """``argv`` in a fresh sandbox that sees ``copy`` read-only at ``mount`` (not ``/workspace``), from ``/tmp``."""
    if mount == "/workspace":
        raise ValueError("a verifier's copy is mounted away from /workspace")
    return _run_to_end(command_line(copy, limits, argv, writable=False, mount=mount), limits)


def _run_to_end(line: list[str], limits: Limits) -> Result:
    require_sandbox()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(line, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        try:
            code: int | None = process.wait(timeout=limits.command_timeout_s)
        except subprocess.TimeoutExpired:
            _kill(process)
            code = None
        streams = []
        for handle in (out, err):
            handle.seek(0)
            streams.append(handle.read(limits.output_bytes + 1))
    truncated = any(len(s) > limits.output_bytes for s in streams)
    stdout, stderr = (s[: limits.output_bytes] for s in streams)
    return Result(code, stdout, stderr, timed_out=code is None, truncated=truncated)

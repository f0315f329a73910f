"""Per-episode workspaces: a size-limited tmpfs owned by a uid that no other sandbox holds.

Each sandbox runs as its own host uid (leased through a lock file), so the kernel's per-uid process
limit (RLIMIT_NPROC) bounds one sandbox without starving the others, and its workspace is a tmpfs
with a byte and an inode limit, so filling the disk fills only that tmpfs. Both need root; the
sandbox refuses to start without it (sandbox.require_sandbox).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(tempfile.gettempdir()) / "agentenvs-shellops"
UID_BASE = 620000
UID_COUNT = 4096
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
_counter = itertools.count()


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(path: Path, size_mb: int, inodes: int, uid: int) -> None:
    """Mount a tmpfs of ``size_mb`` and ``inodes`` on ``path``, its root owned by ``uid``."""
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0755,uid={uid},gid={uid}".encode()
    if _libc().mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount tmpfs on {path}: {os.strerror(errno)}")


def unmount(path: Path) -> None:
    _libc().umount2(str(path).encode(), MNT_DETACH)


class UidLease:
    """A host uid no other live sandbox uses, held by an exclusive lock on ``ROOT/uids/<uid>.lock``.

    Successive leases in one process take different uids."""

    def __init__(self) -> None:
        folder = ROOT / "uids"
        folder.mkdir(parents=True, exist_ok=True)
        start = (os.getpid() * 61 + next(_counter)) % UID_COUNT  # rotate: a killed sandbox's zombie pid 1
        # still counts against its uid's process limit until the host's init reaps it
        for offset in range(UID_COUNT):
            uid = UID_BASE + (start + offset) % UID_COUNT
            fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def processes_of(uid: int) -> list[int]:
    """Host pids of live (not zombie) processes owned by ``uid``: the sandbox's, seen from outside.

    Zombies are left out: they run nothing, and the host's init reaps a killed sandbox's pid 1 late."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid and not _zombie(name):
                    found.append(int(name))
    return found


def _zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
        return handle.read().rpartition(")")[2].split()[0] in ("Z", "X")


def wait_gone(uid: int, timeout_s: float = 3.0) -> list[int]:
    """Wait until no process of ``uid`` is left; the ones still there after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = processes_of(uid)
    while left and time.monotonic() < deadline:
        time.sleep(0.005)
        left = processes_of(uid)
    return left


def sweep_stale() -> None:
    """Unmount workspaces left by processes that died without closing them."""
    prefix = str(ROOT / "ws") + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle]
    for point in points:
        if point.startswith(prefix):
            owner = point[len(prefix) :].split("-")[0]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                unmount(Path(point))
                with contextlib.suppress(OSError):
                    os.rmdir(point)


class Workspace:
    """A fresh tmpfs workspace and the uid its sandbox runs as; ``close`` unmounts it."""

    def __init__(self, size_mb: int, inodes: int) -> None:
        self.lease = UidLease()
        self.uid = self.lease.uid
        self.path = ROOT / "ws" / f"{os.getpid()}-{next(_counter)}-{self.uid}"
        self.path.mkdir(parents=True, mode=0o700)
        try:
            mount_tmpfs(self.path, size_mb, inodes, self.uid)
        except OSError:
            self.path.rmdir()
            self.lease.release()
            raise
        self.closed = False

    def close(self) -> list[int]:
        """Unmount and free the uid once its processes are gone; returns any that refused to go."""
        if self.closed:
            return []
        self.closed = True
        left = wait_gone(self.uid)
        unmount(self.path)
        with contextlib.suppress(OSError):
            self.path.rmdir()
        if not left:
            self.lease.release()
        return left

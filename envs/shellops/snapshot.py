"""Workspace snapshots: a deterministic tar.gz of files, checked before anything is unpacked.

A snapshot is refused as a whole when any member has an absolute path, a ``..`` component, a link
(symbolic or hard) whose target leaves the workspace, or is anything but a file, a folder or such a
link. Files are written with ``O_NOFOLLOW | O_EXCL`` into an empty workspace, so nothing written
can land outside it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import posixpath
import tarfile
from pathlib import Path

MTIME = 1_600_000_000
"""Every unpacked file's modification time, so ``ls -l`` reads the same in every episode."""


class SnapshotError(ValueError):
    """A snapshot that is unsafe to unpack or does not match its checksum."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pack(files: dict[str, bytes], executable: frozenset[str] = frozenset()) -> bytes:
    """The same files give the same bytes: sorted members, fixed times and owners, gzip mtime 0."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        for path in sorted(files):
            member = tarfile.TarInfo(path)
            member.size, member.mtime = len(files[path]), MTIME
            member.mode = 0o755 if path in executable else 0o644
            tar.addfile(member, io.BytesIO(files[path]))
    return buffer.getvalue()


def _check_path(name: str) -> str:
    if not name or name.startswith("/") or "\0" in name:
        raise SnapshotError(f"snapshot member {name!r} has an absolute or empty path")
    parts = name.split("/")
    if ".." in parts:
        raise SnapshotError(f"snapshot member {name!r} traverses out with '..'")
    return posixpath.normpath(name)


def check(data: bytes, expected_sha256: str | None = None) -> list[tarfile.TarInfo]:
    """The members of a safe snapshot; raises :class:`SnapshotError` for anything unsafe."""
    if expected_sha256 is not None and sha256(data) != expected_sha256:
        raise SnapshotError(f"snapshot sha256 {sha256(data)} differs from the task's {expected_sha256}")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
    for member in members:
        name = _check_path(member.name)
        if member.issym() or member.islnk():
            base = posixpath.dirname(name) if member.issym() else ""
            target = posixpath.normpath(posixpath.join(base, member.linkname))
            if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
                raise SnapshotError(f"snapshot link {name!r} -> {member.linkname!r} points out of the workspace")
        elif not (member.isfile() or member.isdir()):
            raise SnapshotError(f"snapshot member {name!r} is not a file, a folder or a link")
    return members


def unpack(data: bytes, dest: Path, uid: int, expected_sha256: str | None = None) -> int:
    """Unpack a checked snapshot into the empty folder ``dest``, owned by ``uid``; the number of members."""
    members = check(data, expected_sha256)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in members:
            target = dest / _check_path(member.name)
            _make_parents(dest, target, uid)
            if member.isdir():
                target.mkdir(mode=0o755, exist_ok=True)
            elif member.issym():
                os.symlink(member.linkname, target)
            elif member.islnk():
                os.link(dest / _check_path(member.linkname), target, follow_symlinks=False)
            else:
                _write(target, tar.extractfile(member).read(), 0o755 if member.mode & 0o111 else 0o644)
            os.lchown(target, uid, uid)
            os.utime(target, (MTIME, MTIME), follow_symlinks=False)
    return len(members)


def read_files(data: bytes, expected_sha256: str) -> dict[bytes, bytes]:
    """The files of a checked snapshot by path (bytes), without writing anything: a solution for the host."""
    members = check(data, expected_sha256)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {os.fsencode(_check_path(m.name)): tar.extractfile(m).read() for m in members if m.isfile()}


def write_files(files: dict[bytes, bytes], dest: Path, uid: int) -> None:
    """Write ``files`` (relative paths, bytes) into the empty folder ``dest``, owned by ``uid``."""
    for path in sorted(files):
        target = dest / _check_path(os.fsdecode(path))
        _make_parents(dest, target, uid)
        _write(target, files[path], 0o644)
        os.lchown(target, uid, uid)


def _make_parents(dest: Path, target: Path, uid: int) -> None:
    """Create the folders above ``target`` without following any link on the way."""
    current = dest
    for part in target.relative_to(dest).parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise SnapshotError(f"snapshot writes through the link {current.relative_to(dest)}")
        if not current.exists():
            current.mkdir(mode=0o755)
            os.chown(current, uid, uid)


def _write(target: Path, content: bytes, mode: int) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)

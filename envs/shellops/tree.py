"""Read a workspace from the host without trusting anything in it: what the anchor hashes and the verifier checks.

The agent's processes may still be running while the host reads, and the host reads as root, so the
walk never follows a link: every folder is opened relative to its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY`` (a folder swapped for a link on the way is an error, not a way out), every
file with ``O_NOFOLLOW | O_NONBLOCK`` and read only when ``fstat`` says it is a regular file (no fifo,
no device). Names stay bytes (a name that is not UTF-8 is an ordinary name). The walk holds one
descriptor per level and stops at ``MAX_DEPTH``; contents are read up to a byte budget (sparse files
can claim far more than the tmpfs holds). A tree cut short either way is ``complete=False``: the
verifier fails it, and its digest still tells it apart.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 64
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    """One path of the tree: its kind (``stat.S_IFMT``), permission bits, and content (files) or target (links).

    ``data`` is None for a file past the byte budget or one that changed kind while it was read."""

    kind: int
    mode: int
    data: bytes | None = b""

    @property
    def is_file(self) -> bool:
        return self.kind == stat.S_IFREG and self.data is not None


@dataclass
class Tree:
    """Relative path (bytes, ``/``-separated) to entry; ``complete`` is False when the walk was cut short."""

    entries: dict[bytes, Entry] = field(default_factory=dict)
    complete: bool = True

    def files(self) -> dict[bytes, bytes]:
        return {path: entry.data for path, entry in self.entries.items() if entry.is_file}

    @functools.cached_property
    def digest(self) -> str:
        """Paths, kinds, modes, contents and link targets (no times, owners or inode numbers)."""
        digest = hashlib.sha256(b"" if self.complete else b"incomplete\0")
        for path in sorted(self.entries):
            entry = self.entries[path]
            data = b"\xff" if entry.data is None else hashlib.sha256(entry.data).digest()
            digest.update(b"%s\0%d\0%o\0%s" % (path, entry.kind, entry.mode, data))
        return digest.hexdigest()[:16]


def read_tree(root: Path, max_bytes: int) -> Tree:
    """Every entry under ``root`` (not ``root`` itself), read as described above."""
    tree, budget = Tree(), [max_bytes]
    top = os.open(root, DIR_FLAGS)
    stack = [(b"", top, sorted(os.listdir(top), reverse=True))]
    while stack:
        prefix, folder, names = stack[-1]
        if not names:
            os.close(folder)
            stack.pop()
            continue
        name = os.fsencode(names.pop())
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:  # removed while the walk went on
            continue
        path, kind, mode = prefix + name, stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode)
        if kind == stat.S_IFDIR:
            tree.entries[path] = Entry(kind, mode)
            child = _open_folder(name, folder) if len(stack) < MAX_DEPTH else None
            if child is None:
                tree.complete = False
            else:
                stack.append((path + b"/", child, sorted(os.listdir(child), reverse=True)))
        elif kind == stat.S_IFLNK:
            tree.entries[path] = Entry(kind, mode, _read_link(name, folder))
        elif kind == stat.S_IFREG:
            tree.entries[path] = Entry(kind, mode, _read_file(name, folder, budget))
            tree.complete &= tree.entries[path].data is not None
        else:
            tree.entries[path] = Entry(kind, mode)
    return tree


def _open_folder(name: bytes, parent: int) -> int | None:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError:  # swapped for a link or removed since it was listed
        return None


def _read_link(name: bytes, parent: int) -> bytes:
    try:
        return os.fsencode(os.readlink(name, dir_fd=parent))
    except OSError:
        return b""


def _read_file(name: bytes, parent: int, budget: list[int]) -> bytes | None:
    """The file's bytes, or None when it is over the budget left or is no longer a regular file."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=parent)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > budget[0]:
            return None
        data = handle.read(budget[0] + 1)
    if len(data) > budget[0]:
        return None
    budget[0] -= len(data)
    return data

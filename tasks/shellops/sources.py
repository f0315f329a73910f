"""Where a build's files come from: a folder on disk or a pinned PyPI sdist, cached once downloaded.

Only text files the tasks need are kept (Python, configuration, docs; at most ``MAX_FILE`` bytes each,
``MAX_TOTAL`` in all, hidden folders skipped), with paths relative to the project's root.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

SUFFIXES = (".py", ".cfg", ".toml", ".txt", ".md", ".rst", ".ini")
MAX_FILE = 64 << 10
MAX_TOTAL = 1 << 20


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTENVS_CACHE", Path.home() / ".cache" / "agentenvs")) / "sdists"


def _keep(path: str, size: int) -> bool:
    parts = path.split("/")
    hidden = any(part.startswith(".") or part == "__pycache__" for part in parts)
    return not hidden and size <= MAX_FILE and (path.endswith(SUFFIXES) or parts[-1] == "PKG-INFO")


def _capped(files: dict[str, bytes]) -> dict[str, bytes]:
    kept, total = {}, 0
    for path in sorted(files):
        total += len(files[path])
        if total > MAX_TOTAL:
            break
        kept[path] = files[path]
    return kept


def from_folder(root: Path) -> dict[str, bytes]:
    """The kept files under ``root``, links not followed."""
    files = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if path.is_file() and not path.is_symlink() and _keep(relative, path.stat().st_size):
                files[relative] = path.read_bytes()
    return _capped(files)


def fetch_sdist(requirement: str, sha256: str | None = None) -> Path:
    """The sdist of ``NAME==VERSION``, downloaded by pip into the cache once; checked against ``sha256``."""
    name, _, version = requirement.partition("==")
    if not name or not version:
        raise ValueError(f"--pypi takes NAME==VERSION, got {requirement!r}")
    folder = cache_dir()
    found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
        folder.glob(f"{name}-{version}.tar.gz")
    )
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*command, requirement, "-d", str(folder)], check=True)
        return fetch_sdist(requirement, sha256)
    path = found[0]
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if sha256 is not None and actual != sha256:
        raise ValueError(f"{path} has sha256 {actual}, but {requirement} is pinned to {sha256}")
    return path


def from_sdist(path: Path) -> dict[str, bytes]:
    """The kept regular files of an sdist, its top folder (``NAME-VERSION/``) stripped."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tar:
        for member in tar.getmembers():
            relative = member.name.partition("/")[2]
            if member.isfile() and relative and ".." not in relative.split("/") and _keep(relative, member.size):
                files[relative] = tar.extractfile(member).read()
    return _capped(files)

"""Frozen task panels: ``panels/<split>.jsonl`` plus a checksummed ``manifest.json`` in the folder the
environment's spec names (``EnvSpec.panels``; ``tasks/<env>/`` for the built-ins).

A panel is read only after its sha256 matches the manifest, so every score names exactly the tasks
it was measured on, and a tampered or half-written panel is refused instead of silently used.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentenvs import registry
from agentenvs.errors import PanelIntegrityError, UnknownSplit

MANIFEST = "manifest.json"


def panel_dir(env: str, root: Path | None = None) -> Path:
    """``root/<env>`` when a root is given (generators writing elsewhere), else the folder its spec names."""
    if root is not None:
        return Path(root) / env
    declared = registry.spec(env).panels
    if declared is None:
        raise PanelIntegrityError(
            f"environment {env!r} declares no panels (EnvSpec.panels); name the package that holds its "
            "manifest.json, or override tasks() and splits() in the environment"
        )
    return _package_dir(declared)


@lru_cache(maxsize=64)
def _package_dir(package: str) -> Path:
    """Where a panel package lies. Resolved once per process: every reset reads the manifest through it, and
    asking importlib each time cost most of a bandit reset (the files' own versions are still checked)."""
    return Path(str(resources.files(package)))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(env: str, root: Path | None = None) -> dict[str, Any]:
    """The parsed manifest (shared and cached per file version: do not mutate it)."""
    path = panel_dir(env, root) / MANIFEST
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise PanelIntegrityError(
            f"no panel manifest at {path}; run the environment's generator (`python -m agentenvs.tasks.{env}.generate` "
            "for a built-in) to write it"
        ) from None
    return _parse_manifest(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _parse_manifest(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def splits(env: str, root: Path | None = None) -> dict[str, int]:
    """Split name to task count, as the manifest records them."""
    manifest = read_manifest(env, root)
    return {name: entry["count"] for name, entry in manifest["splits"].items()}


def panel_hash(env: str, split: str, root: Path | None = None) -> str:
    """The sha256 of a split's panel file as the manifest records it."""
    manifest = read_manifest(env, root)
    if split not in manifest["splits"]:
        raise UnknownSplit(f"{env} has no split {split!r}; its splits are {sorted(manifest['splits'])}")
    return manifest["splits"][split]["sha256"]


@lru_cache(maxsize=64)
def _load_verified(path: str, expected_sha256: str, mtime_ns: int, size: int) -> tuple[dict[str, Any], ...]:
    """Cached per file version (``mtime_ns``, ``size``), so a file edited after its first load is checked again."""
    actual = sha256_file(Path(path))
    if actual != expected_sha256:
        raise PanelIntegrityError(
            f"panel {path} has sha256 {actual}, but its manifest records {expected_sha256}: the file was "
            "changed after it was frozen. Restore it (git checkout) or regenerate the panels with the "
            "environment's generator, which rewrites the manifest."
        )
    with open(path, encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def load_panel(env: str, split: str, root: Path | None = None) -> tuple[dict[str, Any], ...]:
    """The tasks of one split, each a dict with at least ``task_id``; verified against the manifest."""
    manifest = read_manifest(env, root)
    entry = manifest["splits"].get(split)
    if entry is None:
        raise UnknownSplit(f"{env} has no split {split!r}; its splits are {sorted(manifest['splits'])}")
    path = panel_dir(env, root) / entry["file"]
    if not path.is_file():
        raise PanelIntegrityError(f"panel file {path} named by the manifest is missing; regenerate the panels")
    stat = path.stat()
    return _load_verified(str(path), entry["sha256"], stat.st_mtime_ns, stat.st_size)


def write_panels(
    env: str,
    panels: dict[str, list[dict[str, Any]]],
    *,
    generator_version: str,
    seed: int,
    root: Path | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write every split as canonical JSONL and a manifest with their sha256; returns the manifest path.

    The output is byte-identical for identical inputs, so regenerating a panel is checkable.
    """
    folder = panel_dir(env, root)
    (folder / "panels").mkdir(parents=True, exist_ok=True)
    entries = {}
    for split, tasks in panels.items():
        ids = [t["task_id"] for t in tasks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"panel {env}/{split} has duplicate task ids")
        relative = f"panels/{split}.jsonl"
        path = folder / relative
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            for task in tasks:
                handle.write(json.dumps(task, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
        entries[split] = {"file": relative, "count": len(tasks), "sha256": sha256_file(path)}
    manifest = {"env": env, "generator_version": generator_version, "seed": seed, "splits": entries}
    if extra:
        manifest.update(extra)
    manifest_path = folder / MANIFEST
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _load_verified.cache_clear()
    _parse_manifest.cache_clear()
    return manifest_path

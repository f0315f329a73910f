"""``agentenvs tasks build shellops --repo PATH | --pypi NAME==VERSION --n N --out DIR``: mine verified tasks.

Candidates of every kind (``mining.KINDS``) are drawn in a seeded order, round robin over the kinds,
and each is kept only when ``verify.verify`` passes it in the sandbox (the reference solution passes,
the untouched workspace fails; for questions, the reference command prints the answer). The same
inputs and seed give the same tasks, snapshots and checksummed manifest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.envs.shellops.sandbox import run_once
from agentenvs.envs.shellops.snapshot import pack, sha256, unpack
from agentenvs.envs.shellops.workspace import Workspace
from agentenvs.seeding import rng_for
from agentenvs.tasks.shellops import mining, sources
from agentenvs.tasks.shellops.verify import verify

ENV = "shellops"
GENERATOR_VERSION = "1"


def _original_hash(row: dict[str, Any], original: bytes) -> str:
    """The syntax-tree hash of the unmutated function, computed by the sandbox's own python3."""
    workspace = Workspace(64, 8192)
    try:
        unpack(original, workspace.path, workspace.uid)
        return run_once(workspace, row.pop("ast_probe")).stdout.decode().strip()
    finally:
        workspace.close()


def _finish(candidate: mining.Candidate, original: bytes, snapshots: dict[str, bytes]) -> tuple[dict, bytes]:
    row = dict(candidate.row)
    snapshot = pack(candidate.files)
    digest = sha256(snapshot)
    snapshots[digest] = snapshot
    row["snapshot"] = {"file": f"snapshots/{digest}.tar.gz", "sha256": digest}
    if "ast_probe" in row:
        probe = row["ast_probe"]
        expected = _original_hash(row, original)
        row["verifier"] = {"checks": [
            {"name": "function-restored", "command": f'[ "$({probe})" = {expected} ]'},
            {"name": "parses", "command": mining.PARSE_ALL}]}  # fmt: skip
    return row, snapshot


def build(files: dict[str, bytes], label: str, n: int, seed: int = 0) -> tuple[list[dict], dict[str, bytes], list]:
    """Up to ``n`` verified tasks from ``files``; their snapshots by sha256; the rejected ids and why."""
    trees = mining.python_trees(files)
    original = pack(files)
    queues = []
    for kind, mine in mining.KINDS.items():
        found = mine(files, trees, label)
        order = rng_for(ENV, "build", label, kind, seed).permutation(len(found))
        queues.append([found[i] for i in order])
    rows, snapshots, rejected = [], {}, []
    while len(rows) < n and any(queues):
        for queue in queues:
            if queue and len(rows) < n:
                row, snapshot = _finish(queue.pop(0), original, snapshots)
                why = verify(row, snapshot)
                (rejected.append((row["task_id"], why)) if why else rows.append({**row, "source": label}))
    used = {row["snapshot"]["sha256"] for row in rows}
    return rows, {k: v for k, v in snapshots.items() if k in used}, rejected


def write(root: Path, splits: dict[str, list[dict]], snapshots: dict[str, bytes], extra: dict) -> Path:
    """Panels, content-addressed snapshots and the manifest under ``root/shellops/``."""
    folder = root / ENV / "snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    for digest, data in snapshots.items():
        (folder / f"{digest}.tar.gz").write_bytes(data)
    return panels.write_panels(ENV, splits, generator_version=GENERATOR_VERSION, seed=0, root=root, extra=extra)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agentenvs tasks build shellops", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--repo", type=Path, help="a project folder")
    source.add_argument("--pypi", help="NAME==VERSION: its sdist, downloaded by pip and cached")
    parser.add_argument("--n", type=int, default=20, help="how many verified tasks to keep")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/shellops/{manifest.json,panels,snapshots}")
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.repo:
        files, label = sources.from_folder(args.repo), args.repo.resolve().name
    else:
        files, label = sources.from_sdist(sources.fetch_sdist(args.pypi)), args.pypi.replace("==", "-")
    started = time.perf_counter()
    rows, snapshots, rejected = build(files, label, args.n, args.seed)
    manifest = write(args.out, {args.split: rows}, snapshots, {"sources": [label]})
    for task_id, why in rejected:
        print(f"dropped {task_id}: {why}", file=sys.stderr)
    print(f"{len(rows)} verified tasks in {time.perf_counter() - started:.1f} s; manifest {manifest}")
    return 0 if rows else 1

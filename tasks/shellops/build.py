"""``agentenvs tasks build shellops --repo PATH | --pypi NAME==VERSION --n N --out DIR``: mine verified tasks.

Candidates of every kind (``mining.KINDS``) are drawn in a seeded order, round robin over the kinds,
and each is kept only when ``verify.verify`` passes it in the sandbox (the reference solution passes,
the untouched workspace fails; for questions, the reference command prints the answer). An edit's
solution tree is packed as a snapshot of its own, read only by the host's verifier. The same
inputs and seed give the same tasks, snapshots and checksummed manifest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.envs.shellops.sandbox import Limits
from agentenvs.envs.shellops.snapshot import pack, sha256
from agentenvs.envs.shellops.verifier import run_code_checks
from agentenvs.seeding import rng_for
from agentenvs.tasks.shellops import mining, sources
from agentenvs.tasks.shellops.verify import verify

ENV = "shellops"
GENERATOR_VERSION = "2"


def import_name(path: str) -> tuple[str, str] | None:
    """``(root, module)`` of a Python file: ``src/pkg/mod.py`` is ``("src", "pkg.mod")``, ``a/__init__.py`` ``a``."""
    parts = path.removesuffix(".py").split("/")
    root = "src" if parts[0] == "src" and len(parts) > 1 else ""
    parts = parts[1:] if root else parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return (root, ".".join(parts)) if parts and all(p.isidentifier() for p in parts) else None


def importable(solution: dict[str, bytes], changed: tuple[str, ...]) -> list[list[str]]:
    """The changed modules that import over the solution's tree in a verifier sandbox (the imports check)."""
    names = [name for name in map(import_name, changed) if name is not None]
    files = {path.encode(): data for path, data in solution.items()}
    probes = [{"kind": "imports", "modules": [list(name)]} for name in names]
    passed = run_code_checks(probes, files, Limits()) if probes else []
    return [list(name) for name, ok in zip(names, passed, strict=True) if ok]


def verifier_of(candidate: mining.Candidate, snapshots: dict[str, bytes]) -> dict[str, Any]:
    """An edit's verifier: its solution packed as a snapshot, its checks, and an imports check where one applies."""
    solution = pack(candidate.solution)
    digest = sha256(solution)
    snapshots[digest] = solution
    checks = list(candidate.checks)
    modules = importable(candidate.solution, candidate.changed)
    if modules:
        checks.append({"name": "imports", "kind": "imports", "modules": modules})
    return {
        "solution": {"file": f"snapshots/{digest}.tar.gz", "sha256": digest},
        "changed": list(candidate.changed),
        "checks": checks,
    }


def finish(candidate: mining.Candidate, snapshots: dict[str, bytes]) -> dict:
    """The panel row of a candidate; its snapshots (and an edit's solution) are added to ``snapshots``."""
    row = dict(candidate.row)
    snapshot = pack(candidate.files)
    digest = sha256(snapshot)
    snapshots[digest] = snapshot
    row["snapshot"] = {"file": f"snapshots/{digest}.tar.gz", "sha256": digest}
    if candidate.solution is not None:
        row["verifier"] = verifier_of(candidate, snapshots)
    return row


def build(files: dict[str, bytes], label: str, n: int, seed: int = 0) -> tuple[list[dict], dict[str, bytes], list]:
    """Up to ``n`` verified tasks from ``files``; their snapshots by sha256; the rejected ids and why."""
    trees = mining.python_trees(files)
    queues = []
    for kind, mine in mining.KINDS.items():
        found = mine(files, trees, label)
        order = rng_for(ENV, "build", label, kind, seed).permutation(len(found))
        queues.append([found[i] for i in order])
    rows, snapshots, rejected = [], {}, []
    while len(rows) < n and any(queues):
        for queue in queues:
            if queue and len(rows) < n:
                row = finish(queue.pop(0), snapshots)
                why = verify(row, snapshots)
                (rejected.append((row["task_id"], why)) if why else rows.append({**row, "source": label}))
    used = {row["snapshot"]["sha256"] for row in rows}
    used |= {row["verifier"]["solution"]["sha256"] for row in rows if "solution" in row["verifier"]}
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

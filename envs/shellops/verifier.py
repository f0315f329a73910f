"""Task verifiers that trust nothing the agent wrote: the host compares, the sandbox only runs verified code.

A question's verifier is ``{"answer": TEXT, "match": "exact" | "lines"}`` (``lines``: the same set of
non-empty lines, a leading ``./`` ignored). An edit's is ``{"solution": SNAPSHOT, "changed": [PATH...],
"checks": [{"name", "kind", ...}]}``: ``solution`` is the reference solution's whole tree (a snapshot
of the panel that only the host reads), ``changed`` the files the task asks to change. Checks:

- ``files-kept`` (host): the workspace holds exactly the solution's paths (nothing added, deleted or
  turned into a link or folder) and every file not in ``changed`` has the solution's bytes;
- ``same-syntax`` (host): every changed file parses to the solution's syntax tree (layout and comments
  are free, what the code says is not);
- ``renamed`` (host, ``old``, ``new``): no whole-word ``old`` is left in a Python file and ``new``
  occurs as often as in the solution (no reference lost or added);
- ``imports`` (``modules``: ``[[root, module], ...]``) and ``script`` (``path``): each module imports,
  or the script exits 0, in ``python3 -I -S`` started from the sandbox's private ``/tmp`` over a
  read-only copy of the workspace mounted at a fresh random path.

The host reads the workspace with ``tree.read_tree`` (no link followed, nothing but regular files
opened) and compares there: no expected value, hash or file of the solution ever enters a sandbox,
and no code of the workspace runs for the host checks. The code-running checks run only when every
host check passes (otherwise they count as failed), so the code they run is the solution's up to
layout and comments; they confirm it imports and runs, they are not where the reward is decided.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import secrets
import stat
from collections.abc import Callable
from typing import Any

from agentenvs.envs.shellops.sandbox import Limits, run_over_copy
from agentenvs.envs.shellops.snapshot import write_files
from agentenvs.envs.shellops.tree import Tree
from agentenvs.envs.shellops.workspace import Workspace

IMPORT = "import importlib, sys; sys.path.insert(0, sys.argv[1]); importlib.import_module(sys.argv[2])"
PYTHON = ["python3", "-I", "-S"]
SLACK_BYTES = 64 << 10
"""A changed file may grow to 4 times the solution's plus this before it is not even parsed."""


def _lines(text: str) -> list[str]:
    return sorted({line.strip().removeprefix("./") for line in text.splitlines() if line.strip()})


def answer_matches(verifier: dict[str, Any], answer: str) -> bool:
    expected = verifier["answer"]
    if verifier.get("match") == "lines":
        return _lines(answer) == _lines(expected)
    return answer.strip().removeprefix("./") == expected.strip()


def _folders(paths: set[bytes]) -> set[bytes]:
    found = set()
    for path in paths:
        parts = path.split(b"/")[:-1]
        found.update(b"/".join(parts[: i + 1]) for i in range(len(parts)))
    return found


def files_kept(check: dict, tree: Tree, solution: dict[bytes, bytes], changed: set[bytes]) -> bool:
    if not tree.complete:
        return False
    folders = {path for path, entry in tree.entries.items() if entry.kind == stat.S_IFDIR}
    others = {path for path, entry in tree.entries.items() if entry.kind != stat.S_IFDIR}
    if folders != _folders(set(solution)) or others != set(solution):
        return False
    entries = tree.entries
    return all(entries[p].is_file and (p in changed or entries[p].data == data) for p, data in solution.items())


@functools.lru_cache(maxsize=64)
def _syntax(source: bytes) -> str | None:
    """The dump of a file's syntax tree (cached: the solution's files are parsed at every step)."""
    try:
        return ast.dump(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def same_syntax(check: dict, tree: Tree, solution: dict[bytes, bytes], changed: set[bytes]) -> bool:
    for path in changed:
        entry = tree.entries.get(path)
        if entry is None or not entry.is_file or len(entry.data) > 4 * len(solution[path]) + SLACK_BYTES:
            return False
        mine = _syntax(entry.data)
        if mine is None or mine != _syntax(solution[path]):
            return False
    return True


def _python_texts(files: dict[bytes, bytes]) -> list[str]:
    return [data.decode("utf-8", "replace") for path, data in files.items() if path.endswith(b".py")]


def renamed(check: dict, tree: Tree, solution: dict[bytes, bytes], changed: set[bytes]) -> bool:
    old, new = (re.compile(rf"\b{re.escape(check[key])}\b") for key in ("old", "new"))
    texts = _python_texts(tree.files())
    if any(old.search(text) for text in texts):
        return False
    return sum(len(new.findall(text)) for text in texts) == sum(
        len(new.findall(text)) for text in _python_texts(solution)
    )


HOST_CHECKS: dict[str, Callable[[dict, Tree, dict[bytes, bytes], set[bytes]], bool]] = {
    "files-kept": files_kept,
    "same-syntax": same_syntax,
    "renamed": renamed,
}


def _commands(check: dict, mount: str) -> list[list[str]]:
    """The command lines of a code-running check over the copy at ``mount``: names and paths, never a value."""
    if check["kind"] == "imports":
        return [[*PYTHON, "-c", IMPORT, f"{mount}/{root}".rstrip("/"), module] for root, module in check["modules"]]
    if check["kind"] == "script":
        return [[*PYTHON, f"{mount}/{check['path']}"]]
    raise ValueError(f"unknown check kind {check['kind']!r}")


def run_code_checks(checks: list[dict], files: dict[bytes, bytes], limits: Limits) -> list[bool]:
    """Each check over a fresh read-only copy of ``files`` in its own sandbox, from ``/tmp``."""
    copy = Workspace(limits.workspace_mb, limits.workspace_inodes)
    try:
        write_files(files, copy.path, copy.uid)
        mount = f"/checked-{secrets.token_hex(8)}"
        return [
            all(run_over_copy(copy, mount, argv, limits).exit_code == 0 for argv in _commands(check, mount))
            for check in checks
        ]
    finally:
        copy.close()


def check_results(verifier: dict[str, Any], solution: dict[bytes, bytes], tree: Tree, limits: Limits) -> list[bool]:
    """Whether each of the task's checks passes over ``tree``, in the verifier's order."""
    checks = verifier["checks"]
    changed = {os.fsencode(path) for path in verifier["changed"]}
    results: dict[int, bool] = {}
    for index, check in enumerate(checks):
        if check["kind"] in HOST_CHECKS:
            results[index] = HOST_CHECKS[check["kind"]](check, tree, solution, changed)
    code = [index for index in range(len(checks)) if index not in results]
    if code:
        ready = all(results.values()) and tree.complete
        outcomes = run_code_checks([checks[i] for i in code], tree.files(), limits) if ready else [False] * len(code)
        results.update(zip(code, outcomes, strict=True))
    return [results[index] for index in range(len(checks))]

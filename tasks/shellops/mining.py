"""Mine a project's files into ShellOps task candidates of five kinds.

- ``extract-where``: the file that defines a top-level function (defined once in the project);
- ``extract-importers``: the files that import a module of the project;
- ``edit-setting``: set a module-level integer constant to a new value;
- ``edit-bug``: undo a known mutation (``+`` -> ``-``, ``==`` -> ``!=``) put into a function;
- ``chained-rename``: find a function and its uses, then rename it everywhere.

Each candidate is a task row without its snapshot, plus the files it needs (mutated or not) and, for
an edit, the whole tree the task asks for (``solution``, computed here from the syntax trees and text,
independently of the reference commands) and the files it changes. The build turns these into the
verifier (``envs/shellops/verifier.py``): every other file kept byte for byte, the changed ones equal to
the solution's syntax tree, a rename's references counted, the changed modules still importable.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from typing import Any

MUTATIONS = ((" + ", " - "), (" == ", " != "))


@dataclass
class Candidate:
    row: dict[str, Any]
    files: dict[str, bytes]
    solution: dict[str, bytes] | None = None
    changed: tuple[str, ...] = ()
    checks: tuple[dict[str, str], ...] = ()


def python_trees(files: dict[str, bytes]) -> dict[str, ast.Module]:
    trees = {}
    for path, data in files.items():
        if path.endswith(".py"):
            try:
                trees[path] = ast.parse(data.decode("utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
    return trees


def task_row(
    task_id: str, kind: str, instruction: str, verifier: dict, reference: list[str], max_turns: int = 15
) -> dict[str, Any]:
    """One task in the panel format; mined and hand-written tasks share it."""
    return {
        "task_id": task_id,
        "task_type": kind,
        "instruction": instruction,
        "verifier": verifier,
        "reference": reference,
        "max_turns": max_turns,
    }


def _top_functions(trees: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Top-level function name to the files that define it."""
    found: dict[str, list[str]] = {}
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and len(node.name) >= 5 and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(path)
    return found


def where_defined(files: dict[str, bytes], trees: dict[str, ast.Module], label: str) -> list[Candidate]:
    out = []
    for name, paths in sorted(_top_functions(trees).items()):
        if len(paths) == 1:
            reference = [f"<bash>grep -rlE '^def {name}\\(' --include='*.py' .</bash>", f"<submit>{paths[0]}</submit>"]
            instruction = f"In which file is the function `{name}` defined? Submit its path relative to /workspace."
            verifier = {"answer": paths[0], "match": "exact"}
            out.append(
                Candidate(task_row(f"{label}-where-{name}", "extract-where", instruction, verifier, reference), files)
            )
    return out


def _module_name(path: str) -> str | None:
    parts = path.removesuffix(".py").split("/")
    parts = parts[1:] if parts[0] == "src" else parts
    return None if parts[-1] == "__init__" or not all(p.isidentifier() for p in parts) else ".".join(parts)


def importers(files: dict[str, bytes], trees: dict[str, ast.Module], label: str) -> list[Candidate]:
    imported: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                imported.setdefault(name, set()).add(path)
    out = []
    for module in sorted({m for m in map(_module_name, trees) if m}):
        users = sorted(imported.get(module, ()))
        if not users:
            continue
        pattern = re.escape(module)
        command = f"grep -rlE '^\\s*(from {pattern} import|import {pattern}($|[ ,]))' --include='*.py' . | sort"
        answer = "\n".join(users)
        instruction = (
            f"Which files import the module `{module}` (with `import {module}` or `from {module} import`)? "
            "Submit their paths relative to /workspace, one per line."
        )
        reference = [f"<bash>{command}</bash>", f"<submit>{answer}</submit>"]
        row = task_row(
            f"{label}-importers-{module}",
            "extract-importers",
            instruction,
            {"answer": answer, "match": "lines"},
            reference,
        )
        out.append(Candidate(row, files))
    return out


def _edit(row: dict[str, Any], files: dict[str, bytes], solution: dict[str, bytes], check: str) -> Candidate:
    """An edit task: the files as handed out, the solution's tree, and the files it changes."""
    changed = tuple(sorted(path for path in solution if solution[path] != files.get(path)))
    checks = ({"name": "files-kept", "kind": "files-kept"}, {"name": check, "kind": "same-syntax"})
    return Candidate(row, files, solution, changed, checks)


def settings(files: dict[str, bytes], trees: dict[str, ast.Module], label: str) -> list[Candidate]:
    out = []
    for path, tree in sorted(trees.items()):
        lines = files[path].decode("utf-8").split("\n")
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            value, name = node.value, node.targets[0].id
            if not (isinstance(value, ast.Constant) and type(value.value) is int and name.isupper()):
                continue
            if lines[node.lineno - 1] != f"{name} = {value.value}":
                continue
            new = value.value * 2 + 1
            changed = list(lines)
            changed[node.lineno - 1] = f"{name} = {new}"
            instruction = f"Set the constant `{name}` in `{path}` to {new}; change nothing else. Then submit done."
            reference = [f"<bash>sed -i 's/^{name} = {value.value}$/{name} = {new}/' {shlex.quote(path)}</bash>",
                         "<submit>done</submit>"]  # fmt: skip
            row = task_row(f"{label}-set-{name.lower()}", "edit-setting", instruction, {}, reference)
            out.append(_edit(row, files, {**files, path: "\n".join(changed).encode("utf-8")}, "value-set"))
    return out


def renames(files: dict[str, bytes], trees: dict[str, ast.Module], label: str) -> list[Candidate]:
    texts = {path: data.decode("utf-8", "replace") for path, data in files.items() if path.endswith(".py")}
    text = "\n".join(texts.values())
    out = []
    for name, paths in sorted(_top_functions(trees).items()):
        word = re.compile(rf"\b{name}\b")
        uses = len(word.findall(text))
        if len(paths) != 1 or uses < 2 or re.search(rf"\b{name}_v2\b", text):
            continue
        new = f"{name}_v2"
        solution = {**files, **{path: word.sub(new, t).encode("utf-8") for path, t in texts.items() if word.search(t)}}
        instruction = (
            f"Find the function `{name}` and every use of it in the Python files, and rename it to `{new}` "
            "everywhere; change nothing else. Then submit done."
        )
        sed = f"grep -rlw {name} --include='*.py' . | xargs sed -i 's/\\b{name}\\b/{new}/g'"
        reference = [
            f"<bash>grep -rnw {name} --include='*.py' .</bash>",
            f"<bash>{sed}</bash>",
            "<submit>done</submit>",
        ]
        row = task_row(f"{label}-rename-{name}", "chained-rename", instruction, {}, reference)
        candidate = _edit(row, files, solution, "renamed-code")
        candidate.checks += ({"name": "references-kept", "kind": "renamed", "old": name, "new": new},)
        out.append(candidate)
    return out


def bugs(files: dict[str, bytes], trees: dict[str, ast.Module], label: str) -> list[Candidate]:
    """One mutation per function: the first line holding exactly one ``+`` or ``==`` between spaces."""
    out = []
    for path, tree in sorted(trees.items()):
        lines = files[path].decode("utf-8").split("\n")
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            found = _mutable_line(lines, node)
            if found is None:
                continue
            number, before, after = found
            mutated = list(lines)
            mutated[number] = lines[number].replace(before, after, 1)
            original_line, broken_line = lines[number], mutated[number]
            fix = (
                f"p = {path!r}; lines = open(p).read().split(chr(10)); "
                f"lines[{number}] = lines[{number}].replace({broken_line!r}, {original_line!r}); "
                "open(p, 'w').write(chr(10).join(lines))"
            )
            instruction = (
                f"A bug was put into the function `{node.name}` in `{path}`: one operator was changed. "
                "Find it and fix it, changing nothing else (the check compares the code with the correct one). "
                "Then submit done."
            )
            row = task_row(f"{label}-bug-{node.name}", "edit-bug", instruction, {}, [
                f"<bash>grep -n {shlex.quote(after.strip())} {shlex.quote(path)}</bash>",
                f"<bash>python3 -c {shlex.quote(fix)}</bash>", "<submit>done</submit>"])  # fmt: skip
            handed_out = {**files, path: "\n".join(mutated).encode("utf-8")}
            out.append(_edit(row, handed_out, dict(files), "function-restored"))
    return out


def _mutable_line(lines: list[str], node: ast.FunctionDef) -> tuple[int, str, str] | None:
    for number in range(node.lineno, (node.end_lineno or node.lineno)):
        line = lines[number]
        if line.lstrip().startswith("#") or '"' in line or "'" in line:
            continue
        for before, after in MUTATIONS:
            if line.count(before) == 1 and after not in line:
                return number, before, after
    return None


KINDS = {"extract-where": where_defined, "extract-importers": importers, "edit-setting": settings,
         "edit-bug": bugs, "chained-rename": renames}  # fmt: skip

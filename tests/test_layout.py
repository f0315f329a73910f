"""Every built-in environment has the same folder shape and imports run one way (docs/adding-an-environment.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentenvs

ROOT = Path(__file__).resolve().parents[1]
BUILTINS = [name for name in agentenvs.list_envs() if agentenvs.spec(name).entry_point.startswith("agentenvs.envs.")]
ENV_FILES = ("__init__.py", "env.py", "README.md")
TASK_FILES = ("__init__.py", "generate.py", "manifest.json", "panels")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


def sets_environ_at_import(path: Path) -> bool:
    """A module-level statement (outside functions and classes) that writes ``os.environ``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        source = ast.unparse(statement)
        if "os.environ[" in source and isinstance(statement, (ast.Assign, ast.AugAssign)):
            return True
        if any(call in source for call in ("os.environ.setdefault", "os.environ.update", "os.putenv")):
            return True
    return False


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_has_the_folder_shape(name: str):
    missing = [f"envs/{name}/{f}" for f in ENV_FILES if not (ROOT / "envs" / name / f).exists()]
    missing += [f"tasks/{name}/{f}" for f in TASK_FILES if not (ROOT / "tasks" / name / f).exists()]
    assert not missing, f"{name} lacks {missing}"
    assert agentenvs.spec(name).panels == f"agentenvs.tasks.{name}"


@pytest.mark.parametrize("path", sorted((ROOT / "envs").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_environments_never_import_tasks(path: Path):
    wrong = sorted(m for m in imported_modules(path) if m == "agentenvs.tasks" or m.startswith("agentenvs.tasks."))
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}: move what it needs into envs/"


@pytest.mark.parametrize(
    "path",
    sorted(p for top in ("agentenvs", "envs", "tasks", "servers", "evaluation") for p in (ROOT / top).rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_sets_the_environment_when_imported(path: Path):
    assert not sets_environ_at_import(path), f"{path.relative_to(ROOT)} writes os.environ at import"

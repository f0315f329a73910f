"""``agentenvs new-env NAME``: write a working environment skeleton that passes the conformance suite.

It copies ``agentenvs/templates/new_env/`` into ``envs/NAME/``, ``tasks/NAME/`` and ``tests/envs/`` of
a source checkout, then runs the new generator to freeze its panel. Nothing else changes: the
registry finds ``envs/NAME/SPEC`` through the built-ins' one entry point, without a reinstall.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from string import Template

from agentenvs import registry
from agentenvs.errors import InvalidArgument

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
FILES = {
    "env_init.py.tmpl": "envs/{name}/__init__.py",
    "env.py.tmpl": "envs/{name}/env.py",
    "baselines.py.tmpl": "envs/{name}/baselines.py",
    "README.md.tmpl": "envs/{name}/README.md",
    "tasks_init.py.tmpl": "tasks/{name}/__init__.py",
    "generate.py.tmpl": "tasks/{name}/generate.py",
    "test_env.py.tmpl": "tests/envs/test_{name}.py",
}
"""Template to the path it is written to, relative to the checkout's root."""


def checkout_root() -> Path:
    """The source checkout the built-in environments are loaded from (``envs/`` is ``agentenvs.envs``)."""
    import agentenvs.envs

    root = Path(next(iter(agentenvs.envs.__path__))).resolve().parent
    if not (root / "pyproject.toml").is_file() or not (root / "tasks").is_dir():
        raise InvalidArgument(
            f"agentenvs is installed from {root}, not from a source checkout; clone the repository, "
            "`pip install -e .` it, and run new-env there (or pass --root CHECKOUT)"
        )
    return root


def write_skeleton(name: str, root: Path) -> list[Path]:
    """Write every template for ``name`` under ``root``; refuses a taken name or an existing file."""
    if not NAME.match(name):
        raise InvalidArgument(f"{name!r} is not a valid name: use 2-31 lower-case letters, digits or _, letter first")
    if name in registry.list_envs():
        raise InvalidArgument(f"an environment named {name!r} is already registered; pick another name")
    targets = {template: root / path.format(name=name) for template, path in FILES.items()}
    taken = [str(path) for path in targets.values() if path.exists()]
    if taken:
        raise InvalidArgument(f"{', '.join(taken)} already exist; remove them or pick another name")
    words = {"name": name, "Class": name.title().replace("_", ""), "title": name.replace("_", " ").title()}
    folder = resources.files("agentenvs") / "templates" / "new_env"
    texts = {
        path: Template((folder / template).read_text(encoding="utf-8")).substitute(words)
        for template, path in targets.items()
    }
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(targets.values())


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = (
        "Write a new environment (envs/NAME/, tasks/NAME/ with one frozen panel, tests/envs/test_NAME.py) "
        "that passes the conformance suite at once; docs/adding-an-environment.md walks through it."
    )
    parser.add_argument("name", help="the environment's name: lower-case letters, digits and _")
    parser.add_argument("--root", type=Path, default=None, help="the source checkout to write into (default: found)")


def run(args: argparse.Namespace) -> int:
    try:
        root = (args.root or checkout_root()).resolve()
        written = write_skeleton(args.name, root)
    except InvalidArgument as exc:
        print(f"agentenvs new-env: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(root)}")
    subprocess.run([sys.executable, "-m", f"agentenvs.tasks.{args.name}.generate"], cwd=root, check=True)
    print(
        f"\n{args.name} is registered (`agentenvs list`). Next: edit envs/{args.name}/env.py, regenerate its "
        f"panel (python -m agentenvs.tasks.{args.name}.generate) and run pytest tests/envs/test_{args.name}.py"
    )
    return 0

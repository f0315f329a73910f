"""``agentenvs new-env``: the skeleton passes the conformance suite at once, and without a reinstall the
new environment is listed, evaluated and served; it touches nothing outside envs/, tasks/ and tests/."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs import scaffold
from agentenvs.errors import InvalidArgument

NAME = "scaffoldcheck"


def cli(*args: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", *args], cwd=root, capture_output=True, text=True, timeout=300
    )


def git_changes(root: Path) -> set[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, text=True
    )
    return {line[3:] for line in done.stdout.splitlines()}


@pytest.fixture(scope="module")
def skeleton() -> Iterator[Path]:
    """``agentenvs new-env scaffoldcheck`` run in this checkout; its files are removed afterwards."""
    root = scaffold.checkout_root()
    before = git_changes(root)
    made = cli("new-env", NAME, root=root)
    try:
        assert made.returncode == 0, made.stderr
        new = git_changes(root) - before
        assert new and all(path.startswith((f"envs/{NAME}/", f"tasks/{NAME}/", "tests/")) for path in new), new
        yield root
    finally:
        for folder in (root / "envs" / NAME, root / "tasks" / NAME):
            shutil.rmtree(folder, ignore_errors=True)
        (root / "tests" / "envs" / f"test_{NAME}.py").unlink(missing_ok=True)


def test_the_skeleton_passes_its_own_tests_and_the_conformance_suite(skeleton: Path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/envs/test_{NAME}.py"],
        cwd=skeleton, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_new_environment_is_listed_and_evaluated_without_a_reinstall(skeleton: Path, tmp_path: Path):
    listed = cli("list", root=skeleton)
    assert listed.returncode == 0 and NAME in listed.stdout, listed.stderr
    evaluated = cli(
        "eval",
        "--env",
        NAME,
        "--policy",
        "random",
        "--limit",
        "3",
        "--out",
        str(tmp_path),
        "--no-progress",
        root=skeleton,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads((tmp_path / "results.json").read_text())["env"]["name"] == NAME


def test_the_new_environment_is_served(skeleton: Path):
    script = (
        "import agentenvs; from agentenvs.servers.launch import launch_server\n"
        f"server = launch_server(['{NAME}'], workers=1)\n"
        f"try:\n    env = agentenvs.connect(server.url).make('{NAME}')\n"
        "    observation, info = env.reset(seed=0)\n    print(env.step(info['admissible_actions'][0])[4]['turn'])\n"
        "finally:\n    server.stop()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=skeleton, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


@pytest.mark.parametrize("name", ["Bad", "x", "bandit", "9lives"])
def test_a_bad_or_taken_name_is_refused_before_anything_is_written(name: str, tmp_path: Path):
    with pytest.raises(InvalidArgument):
        scaffold.write_skeleton(name, tmp_path)
    assert not any(tmp_path.iterdir())

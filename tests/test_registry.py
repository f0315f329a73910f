"""Environment packages: a third-party package installed in a temp dir is listed, checked, evaluated and
served exactly like a built-in, through its ``agentenvs.envs`` entry point and the panels its spec names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentenvs
from agentenvs import panels
from agentenvs.errors import InvalidArgument
from agentenvs.registry import ENTRY_POINT_GROUP

ENV_MODULE = '''
"""A coin to call: one third-party environment, with its own spec and panels."""

from typing import Any, ClassVar

from agentenvs.core import TextEnv, Transition
from agentenvs.registry import EnvSpec

SPEC = EnvSpec(
    name="coin", entry_point="coin:CoinEnv", gym_id="coin/Coin-v0", version="3",
    summary="call the hidden side of a coin", max_turns=3, panels="coin",
)


class CoinEnv(TextEnv):
    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    has_admissible_actions: ClassVar[bool] = True

    def _reset(self, task: dict[str, Any], rng: Any) -> tuple[str, dict[str, Any]]:
        return "Call the coin: heads or tails.", self._info()

    def _step(self, action: str) -> Transition:
        right = action == self._task["side"]
        info = {**self._info(), "action_valid": action in ("heads", "tails"), "score": float(right)}
        return Transition("right" if right else "wrong", reward=float(right), terminated=right, info=info)

    def _info(self) -> dict[str, Any]:  # no anchor: a wrong call changes nothing, so there is one state
        return {"admissible_actions": ["heads", "tails"], "score": 0.0}
'''

PYPROJECT = f"""
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "coinenv"
version = "0.1.0"

[project.entry-points."{ENTRY_POINT_GROUP}"]
coin = "coin:SPEC"

[tool.setuptools]
packages = ["coin"]

[tool.setuptools.package-data]
coin = ["manifest.json", "panels/*.jsonl"]
"""

SCRIPT = """
import functools, json, sys
import agentenvs
from agentenvs.servers.launch import launch_server
from agentenvs.testing import check_text_env

report = check_text_env(functools.partial(agentenvs.make, "coin"))
server = launch_server(["coin"], workers=1, env_vars={"PYTHONPATH": sys.argv[1]})
try:
    env = agentenvs.connect(server.url).make("coin")
    observation, info = env.reset(seed=0, options={"task_id": "coin-1"})
    served = [env.step(action)[4]["score"] for action in ("heads", "tails")]
    env.close()
finally:
    server.stop()
print(json.dumps({"skipped": report.skipped, "failures": report.failures, "served": served,
                  "describe": agentenvs.describe("coin")["version"]}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package ``coinenv`` (module ``coin``) installed with pip --target into a temp dir, outside this repo."""
    source = tmp_path_factory.mktemp("coinenv-src")
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "coin").mkdir()
    (source / "coin" / "__init__.py").write_text(ENV_MODULE)
    tasks = [{"task_id": f"coin-{i}", "side": side} for i, side in enumerate(("heads", "tails", "heads"))]
    panels.write_panels("coin", {"test": tasks}, generator_version="1", seed=0, root=source)
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
    )
    return target


def run_with(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def test_a_third_party_package_is_listed_with_its_spec(site: Path):
    listed = run_with(site, sys.executable, "-m", "agentenvs.cli", "list")
    assert listed.returncode == 0, listed.stderr
    assert "coin" in listed.stdout and "coin/Coin-v0" in listed.stdout


def test_a_third_party_package_passes_conformance_and_is_served(site: Path):
    done = run_with(site, sys.executable, "-c", SCRIPT, str(site))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failures"] == {}
    assert result["served"] == [0.0, 1.0]
    assert result["describe"] == "3"


def test_a_third_party_package_is_evaluated_from_its_own_panel(site: Path, tmp_path: Path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "agentenvs.cli", "eval", "--env", "coin", "--policy", "random"]
    done = run_with(site, *command, "--k", "2", "--out", str(run), "--no-progress")
    assert done.returncode == 0, done.stderr
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert {e["task_id"] for e in episodes} == {"coin-0", "coin-1", "coin-2"} and len(episodes) == 6
    assert {e["env_version"] for e in episodes} == {"3"}


def test_an_entry_point_that_names_something_else_is_refused_with_the_fix(tmp_path: Path):
    (tmp_path / "badenv").mkdir()
    (tmp_path / "badenv" / "__init__.py").write_text("SPEC = 'not a spec'\n")
    info = tmp_path / "badenv-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badenv\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbad = badenv:SPEC\n")
    done = run_with(tmp_path, sys.executable, "-c", "import agentenvs; agentenvs.list_envs()")
    assert done.returncode != 0
    assert "must name an agentenvs.EnvSpec" in done.stderr


def test_a_runtime_registration_does_not_silently_replace_a_package(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(InvalidArgument, match="already registered"):
        agentenvs.register("bandit", "json:JSONDecoder")


def test_every_builtin_has_a_spec_in_its_own_package():
    for name in ("bandit", "alfworld", "sciworld"):
        entry = agentenvs.spec(name)
        assert entry.entry_point.startswith(f"agentenvs.envs.{name}.") and entry.panels == f"agentenvs.tasks.{name}"
        assert agentenvs.env_class(name).version == entry.version
        assert agentenvs.env_class(name).default_max_turns == entry.max_turns


def test_the_top_level_exports_its_api_only():
    import types

    public = {name for name in dir(agentenvs) if not name.startswith("_")}
    modules = {name for name in public if isinstance(getattr(agentenvs, name), types.ModuleType)}
    extra = public - set(agentenvs.__all__) - modules
    assert not extra, f"agentenvs exposes {sorted(extra)} outside __all__"
    assert all(hasattr(agentenvs, name) for name in agentenvs.__all__)


def test_threads_that_use_the_registry_first_all_see_every_environment(monkeypatch):
    import threading

    from agentenvs import registry

    def forget_discovery() -> None:
        monkeypatch.setattr(registry, "_REGISTRY", {})
        monkeypatch.setattr(registry, "_DISCOVERED", False)
        monkeypatch.setattr(registry, "_READY", False)

    forget_discovery()
    expected = registry.list_envs()  # what one thread discovers (environments other tests register are not in it)
    forget_discovery()
    barrier, seen = threading.Barrier(8), []

    def first_use() -> None:
        barrier.wait()
        seen.append(registry.list_envs())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [expected] * 8

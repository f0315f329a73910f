"""The ShellOps builder: verified tasks of every kind from a project folder, reproducibly, and the panels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentenvs
from agentenvs.cli import main
from agentenvs.envs.shellops.snapshot import read_files
from agentenvs.tasks.shellops import build, generate, mining, sources
from agentenvs.tasks.shellops.verify import verify

PROJECT = {
    "pkg/__init__.py": "from pkg.core import compute_total\n",
    "pkg/core.py": "LIMIT = 10\n\n\ndef compute_total(a, b):\n    return a + b\n\n\ndef same_value(a, b):\n"
    "    return a == b\n",
    "pkg/cli.py": "from pkg.core import compute_total\n\n\ndef run_main():\n    print(compute_total(1, 2))\n",
    ".hidden/secret.py": "x = 1\n",
}


def make_project(root: Path) -> Path:
    for path, text in PROJECT.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_every_kind_is_mined_and_verified(tmp_path):
    files = sources.from_folder(make_project(tmp_path / "proj"))
    assert ".hidden/secret.py" not in files
    rows, snapshots, rejected = build.build(files, "proj", 50)
    kinds = {row["task_type"] for row in rows}
    assert kinds == set(mining.KINDS), (kinds, rejected)
    for row in rows:
        assert row["snapshot"]["sha256"] in snapshots


def test_a_task_whose_reference_fails_or_that_is_already_solved_is_dropped(tmp_path):
    files = sources.from_folder(make_project(tmp_path / "proj"))
    rows, snapshots, _ = build.build(files, "proj", 50)
    rename = next(row for row in rows if row["task_type"] == "chained-rename")
    broken = {**rename, "reference": ["<submit>done</submit>"]}
    assert verify(broken, snapshots) == "the reference solution fails the verifier"
    question = next(row for row in rows if row["task_type"] == "extract-where")
    lying = {**question, "reference": ["<bash>echo elsewhere.py</bash>", question["reference"][-1]]}
    assert verify(lying, snapshots) == "the reference solution fails the verifier"
    kept_only = [check for check in rename["verifier"]["checks"] if check["kind"] == "files-kept"]
    solved = {**rename, "verifier": {**rename["verifier"], "checks": kept_only}}
    assert verify(solved, snapshots) == "the untouched workspace already passes the verifier"


def test_an_edit_verifier_holds_the_solution_tree_the_changed_files_and_the_imports(tmp_path):
    files = sources.from_folder(make_project(tmp_path / "proj"))
    rows, snapshots, _ = build.build(files, "proj", 50)
    rename = next(row for row in rows if row["task_id"] == "proj-rename-compute_total")
    verifier = rename["verifier"]
    solution = read_files(snapshots[verifier["solution"]["sha256"]], verifier["solution"]["sha256"])
    assert verifier["changed"] == ["pkg/__init__.py", "pkg/cli.py", "pkg/core.py"]
    assert b"compute_total_v2(1, 2)" in solution[b"pkg/cli.py"] and solution[b"pkg/core.py"].count(b"_v2") == 1
    assert [c["kind"] for c in verifier["checks"]] == ["files-kept", "same-syntax", "renamed", "imports"]
    assert verifier["checks"][-1]["modules"] == [["", "pkg"], ["", "pkg.cli"], ["", "pkg.core"]]
    assert rename["snapshot"]["sha256"] != verifier["solution"]["sha256"]


def test_the_cli_builds_the_same_checksummed_panel_twice(tmp_path):
    project = make_project(tmp_path / "proj")
    manifests = []
    for out in ("a", "b"):
        assert (
            main(["tasks", "build", "shellops", "--repo", str(project), "--n", "4", "--out", str(tmp_path / out)]) == 0
        )
        manifests.append((tmp_path / out / "shellops" / "manifest.json").read_text())
    assert manifests[0] == manifests[1]
    assert json.loads(manifests[0])["splits"]["test"]["count"] == 4


def test_the_shipped_panels_come_from_disjoint_pinned_sdists():
    assert not set(generate.TRAIN) & set(generate.TEST)
    env = agentenvs.make("shellops")
    try:
        splits = env.splits()
        train_sources = {task["source"] for task in env.tasks("train")}
        test_sources = {task["source"] for task in env.tasks("test")}
    finally:
        env.close()
    assert splits["train"] >= 20 and splits["test"] >= 20
    assert train_sources == {r.replace("==", "-") for r in generate.TRAIN}
    assert test_sources == {r.replace("==", "-") for r in generate.TEST}


def test_a_cached_sdist_that_does_not_match_its_pin_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTENVS_CACHE", str(tmp_path))
    (tmp_path / "sdists").mkdir()
    (tmp_path / "sdists" / "demo-1.0.tar.gz").write_bytes(b"not the pinned file")
    with pytest.raises(ValueError, match="pinned to"):
        sources.fetch_sdist("demo==1.0", "0" * 64)
    assert sources.fetch_sdist("demo==1.0").name == "demo-1.0.tar.gz"

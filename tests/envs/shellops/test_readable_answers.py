"""ShellOps refuses to start where its panels (verifiers, reference solutions) are readable in the sandbox."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

import agentenvs
from agentenvs import panels
from agentenvs.envs.shellops.sandbox import SYSTEM_BINDS, AnswersReadable, exposing_bind, run_once
from agentenvs.envs.shellops.workspace import Workspace


@pytest.fixture
def system_install():
    """A copy of the shipped panels where a system-wide install would put them (under /usr)."""
    try:
        root = Path(tempfile.mkdtemp(prefix="agentenvs-test-", dir="/usr/local/share"))
    except OSError as exc:
        pytest.skip(f"/usr/local/share is not writable here: {exc}")
    root.chmod(0o755)  # as pip leaves a system-wide install: readable by every user
    shutil.copytree(panels.panel_dir("shellops"), root / "shellops")
    yield root / "shellops"
    shutil.rmtree(root)


def test_paths_under_a_system_bind_are_flagged_links_resolved(tmp_path):
    assert exposing_bind(Path("/usr/lib/python3/dist-packages/agentenvs/tasks/shellops")) == "/usr"
    assert exposing_bind(Path("/usr")) == "/usr"
    assert exposing_bind(Path("/etc/alternatives/x")) == "/etc/alternatives"
    assert exposing_bind(Path("/usrlocal/shellops")) is None
    assert exposing_bind(tmp_path) is None
    (tmp_path / "via-link").symlink_to("/usr/share")
    assert exposing_bind(tmp_path / "via-link" / "agentenvs") == "/usr"
    assert exposing_bind(panels.panel_dir("shellops")) is None, "this checkout itself is exposed"


def test_the_bind_list_is_what_the_sandbox_reads(system_install, tmp_path):
    """A file under the fake system install is readable in a sandbox; one outside every bind is not."""
    (tmp_path / "private.txt").write_text("private\n")
    workspace = Workspace(1, 64)
    try:
        seen = run_once(workspace, f"cat {system_install / 'manifest.json'}")
        hidden = run_once(workspace, f"cat {tmp_path / 'private.txt'}")
    finally:
        workspace.close()
    assert seen.exit_code == 0 and b'"env": "shellops"' in seen.stdout
    assert hidden.exit_code != 0
    assert exposing_bind(system_install) == "/usr" and "/usr" in SYSTEM_BINDS


def test_make_refuses_panels_under_a_sandbox_bind_and_says_how_to_install(system_install, monkeypatch):
    monkeypatch.setattr(panels, "panel_dir", lambda env, root=None: system_install)
    with pytest.raises(AnswersReadable, match=r"refuses to start.*under /usr.*virtual environment") as raised:
        agentenvs.make("shellops")
    assert raised.value.code == "missing_dependency"

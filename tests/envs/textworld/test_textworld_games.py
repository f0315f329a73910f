"""A panel game is the same bytes on every machine: whatever order the filesystem lists TextWorld's
files in, wherever TextWorld is installed, wherever the game is built."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from agentenvs.envs.textworld.games import game_digest, generate
from agentenvs.panels import load_panel

TASK = load_panel("textworld", "demo")[2]


def copy_listing_in_another_order(source: Path, target: Path) -> None:
    """Copy ``source`` creating each folder's entries in its own listing order (tmpfs lists newest first)."""
    target.mkdir(parents=True)
    for name in os.listdir(source):
        if (source / name).is_dir() and not (source / name).is_symlink():
            copy_listing_in_another_order(source / name, target / name)
        else:
            shutil.copy2(source / name, target / name)


@pytest.mark.slow
def test_a_game_is_the_same_whatever_order_and_place_textworld_is_installed_in(tmp_path, monkeypatch):
    import textworld

    installed = Path(textworld.__file__).parent
    scratch = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path
    with tempfile.TemporaryDirectory(dir=scratch, prefix="agentenvs-textworld-copy-") as root:
        copy = Path(root) / "elsewhere" / "textworld"
        copy_listing_in_another_order(installed, copy)
        languages = "thirdparty/inform7-6M62/share/inform7/Internal/Languages"
        differs = [os.listdir(installed / sub) != os.listdir(copy / sub) for sub in (languages, "generator/data/logic")]
        if not all(differs):
            pytest.skip(f"the filesystem under {scratch} lists a copy in the original's order; nothing to compare")
        monkeypatch.setenv("PYTHONPATH", root + "/elsewhere")
        monkeypatch.chdir(tmp_path)
        game = generate(TASK["family"], TASK["level"], TASK["kind"], TASK["seed"], Path("a") / "relative" / "folder")
    assert game["walkthrough"] == TASK["walkthrough"]
    assert game_digest(tmp_path / "a" / "relative" / "folder") == TASK["game_sha256"]

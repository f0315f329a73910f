"""Which checkpoint a ``model.path`` names: a local folder, or a hub id resolved through the real
huggingface_hub cache (offline here: the cache is built on disk the way the hub client lays it out)."""

from __future__ import annotations

import pytest
from huggingface_hub import constants

from agentenvs.errors import InvalidArgument
from agentenvs.train.modeling import resolve_path


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """An empty hub cache under ``tmp_path`` and no network for the hub client."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_a_local_checkpoint_folder_is_used_as_it_is(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve_path(str(tmp_path)) == str(tmp_path)


def test_a_folder_without_config_is_an_error(tmp_path):
    with pytest.raises(InvalidArgument, match=r"no config\.json"):
        resolve_path(str(tmp_path))


def test_a_hub_id_in_the_cache_resolves_to_its_snapshot(offline_hub):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = offline_hub / "models--owner--model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert resolve_path("owner/model") == str(snapshot)


def test_an_unreachable_hub_id_says_how_to_bring_the_model(offline_hub):
    with pytest.raises(InvalidArgument, match=r"hf download owner/missing --local-dir DIR"):
        resolve_path("owner/missing")

"""Config files: the examples load, typos are errors that list the known settings, overrides apply."""

from __future__ import annotations

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.train.config import CONFIG_DIR, apply_overrides, config_from_dict, load_config


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_load(path):
    config = load_config(path)
    assert config.rollout.group_size >= 2
    assert config.run.out


def test_gpu_recipes_use_vllm_with_lora():
    for name in ("alfworld_qwen15b_vllm.yaml", "sciworld_qwen15b_vllm.yaml"):
        config = load_config(CONFIG_DIR / name)
        assert config.vllm.url and config.vllm.sync == "lora" and config.model.lora


def test_unknown_setting_is_an_error_naming_the_known_ones():
    with pytest.raises(InvalidArgument, match=r"unknown setting\(s\) \['group_sise'\] in rollout\..*group_size"):
        config_from_dict({"rollout": {"group_sise": 4}})
    with pytest.raises(InvalidArgument, match="unknown setting"):
        config_from_dict({"modle": {}})


def test_bad_values_name_the_setting():
    with pytest.raises(InvalidArgument, match=r"algorithm.estimator"):
        config_from_dict({"algorithm": {"estimator": "ppo"}})
    with pytest.raises(InvalidArgument, match=r"loss.agg"):
        config_from_dict({"loss": {"agg": "mean"}})
    with pytest.raises(InvalidArgument, match=r"model.lora"):
        config_from_dict({"vllm": {"url": "http://127.0.0.1:8000/v1", "sync": "lora"}})
    with pytest.raises(InvalidArgument, match=r"rollout.group_size"):
        config_from_dict({"rollout": {"group_size": 0}})


def test_overrides_parse_json_values_and_create_sections():
    data = apply_overrides({"run": {"steps": 3}}, ["run.steps=7", 'rollout.stop=["\\n"]', "run.out=runs/x"])
    assert data == {"run": {"steps": 7, "out": "runs/x"}, "rollout": {"stop": ["\n"]}}
    with pytest.raises(InvalidArgument, match=r"section.key=value"):
        apply_overrides({}, ["steps"])


def test_missing_config_file_points_to_the_examples(tmp_path):
    with pytest.raises(InvalidArgument, match="examples are in"):
        load_config(tmp_path / "nope.yaml")

"""Every GPU recipe runs on the CPU as it is written, cut down: the tiny model in place of Qwen, in-process
rollouts in place of vLLM, two steps of one small group, and the evaluation it configures (both ALFWorld
validation splits, WebShop's test goals...). A recipe that names a split the environment lacks, a setting
the trainer does not know, or an environment option that fails, fails here and not an hour into a GPU run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentenvs.train.config import CONFIG_DIR, load_config
from agentenvs.train.trainer import Trainer

RECIPES = sorted(p.name for p in CONFIG_DIR.glob("*_vllm.yaml"))
SHARED_DATA = Path(
    os.environ.get("AGENTENVS_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data"
)
ALFWORLD_DATA = Path(os.environ.get("AGENTENVS_ALFWORLD_OFFICIAL") or SHARED_DATA / "alfworld")
DRY_RUN = [
    'model.path="tiny"',
    'model.tiny={"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}',
    'model.dtype="float32"',
    "model.lora_rank=4",
    "vllm.url=null",
    "rollout.groups_per_step=1",
    "rollout.group_size=2",
    "rollout.max_tokens=8",
    "rollout.concurrency=2",
    "rollout.batch_size=2",
    "env.max_turns=2",
    "env.eval_groups=2",
    "run.steps=2",
    "run.eval_every=2",
    "run.save_every=0",
    "run.progress=false",
    "run.torch_threads=1",
]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES)
def test_every_gpu_recipe_trains_two_steps_and_evaluates_on_the_cpu(recipe, tmp_path, monkeypatch):
    overrides = [*DRY_RUN, f"run.out={tmp_path}"]
    config = load_config(CONFIG_DIR / recipe, overrides)
    if config.env.kwargs.get("official"):
        if not (ALFWORLD_DATA / "json_2.1.1" / "valid_seen").is_dir():
            pytest.fail(f"the official ALFWorld games are not under {ALFWORLD_DATA} (AGENTENVS_ALFWORLD_OFFICIAL)")
        monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
        config.env.split = "valid_seen"  # the shipped games hold the two validation splits only
    with Trainer(config) as trainer:
        history = trainer.train()
    assert [m["step"] for m in history] == [1, 2]
    evaluated = {key for key in history[-1] if key.startswith("eval/")}
    splits = config.eval_splits
    assert splits, f"{recipe} evaluates on nothing"
    for split in splits:
        prefix = "eval" if len(splits) == 1 else f"eval/{split}"
        assert {f"{prefix}/success", f"{prefix}/score"} <= evaluated, (split, sorted(evaluated))

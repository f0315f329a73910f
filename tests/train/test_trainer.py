"""The loop on a real (small) model and a real environment: metrics, checkpoints, resume, LoRA, KL,
multi-turn rows, and the CLI. Learning itself is tested in test_learning.py."""

from __future__ import annotations

import json

import pytest

from agentenvs.cli import main
from agentenvs.train.config import CONFIG_DIR, config_from_dict
from agentenvs.train.trainer import Trainer, latest_checkpoint

SMALL = {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}


def small_config(out, **sections):
    base = {
        "model": {"path": "tiny", "tiny": SMALL},
        "env": {"name": "bandit-tiny", "entry_point": "agentenvs.train.tiny_bandit:TinyBandit", "eval_groups": 4},
        "rollout": {"groups_per_step": 2, "group_size": 4, "max_tokens": 8, "concurrency": 8, "batch_size": 8},
        "warmup": {"steps": 2, "episodes": 8, "batch_size": 4},
        "algorithm": {"filter_zero_variance": False},
        "optim": {"lr": 1e-3, "micro_batch_size": 3},
        "run": {"steps": 2, "out": str(out), "progress": False, "torch_threads": 1},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return config_from_dict(base)


def test_loop_logs_metrics_plots_checkpoints_and_resumes(tmp_path):
    with Trainer(small_config(tmp_path)) as trainer:
        history = trainer.train()
    assert [m["step"] for m in history] == [1, 2]
    first = history[0]
    for key in ("reward/mean", "success/rate", "loss/kl_ref", "loss/entropy", "loss/clip_fraction",
                "perf/tokens_per_s", "time/rollout_s", "time/update_s", "time/sync_s", "batch/rows"):  # fmt: skip
        assert key in first, key
    assert first["batch/rows"] == 8  # 2 groups x 4 episodes x 1 turn
    assert first["loss/entropy"] > 0
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert latest_checkpoint(tmp_path).name == "step-2"
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1, 2]  # warm-up, then the steps
    with Trainer(small_config(tmp_path, run={"steps": 3})) as resumed:
        assert resumed.step == 2
        resumed.train()
    assert latest_checkpoint(tmp_path).name == "step-3"
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2, 3]


def test_multi_turn_gigpo_epochs_minibatches_kl_and_actfocus(tmp_path):
    config = small_config(
        tmp_path,
        env={"kwargs": {"horizon": 3}},
        warmup={"steps": 0},
        algorithm={"estimator": "gigpo", "reasoning_weight": 0.5, "uncertainty_beta": 0.2},
        loss={"kl_coef": 0.05, "entropy_coef": 0.01, "agg": "seq-mean-token-sum-norm"},
        optim={"epochs": 2, "mini_batches": 2},
        run={"steps": 1},
    )
    with Trainer(config) as trainer:
        metrics = trainer.train_step()
    assert metrics["batch/rows"] == 2 * 4 * 3  # every turn of every episode is a row
    assert metrics["optim/optimizer_steps"] == 4
    assert metrics["loss/kl_ref"] >= 0.0
    assert metrics["check/sampler_logprob_gap"] < 1e-3  # the sampler and the trainer agree


def test_lora_training_changes_only_adapters(tmp_path):
    config = small_config(tmp_path, model={"lora": True, "lora_rank": 4}, warmup={"steps": 0}, run={"steps": 1})
    with Trainer(config) as trainer:
        frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
        trainer.train()
        assert all((p == frozen[n]).all() for n, p in trainer.model.named_parameters() if n in frozen)
    assert (latest_checkpoint(tmp_path) / "adapter_config.json").is_file()


def test_cli_trains_from_a_config_file(tmp_path, capsys):
    args = ["train", "--config", str(CONFIG_DIR / "bandit_tiny_cpu.yaml"), "--out", str(tmp_path), "--fresh"]
    tiny_sizes = json.dumps(SMALL)
    sets = ["run.steps=1", "warmup.steps=1", "rollout.groups_per_step=1", "rollout.group_size=2",
            f"model.tiny={tiny_sizes}", "run.progress=false", "env.eval_groups=2", "run.eval_every=1"]  # fmt: skip
    assert main(args + [x for s in sets for x in ("--set", s)]) == 0
    out = capsys.readouterr().out
    assert '"step": 1' in out and "metrics:" in out
    assert "eval/mean" in json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])


def test_cli_reports_config_errors(capsys):
    assert main(["train", "--set", "rollout.group_sise=4", "--print-config"]) == 2
    assert "unknown setting" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--help"])
def test_cli_help_explains_outputs(flag, capsys):
    with pytest.raises(SystemExit):
        main(["train", flag])
    assert "resumes from the last" in capsys.readouterr().out

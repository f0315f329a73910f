"""A learning run of TRL 1.16's ``GRPOTrainer`` on a multi-turn environment through our adapter.

``agentenvs.integrations.trl.EnvRollout`` plays whole ``bandit-tiny`` episodes (3 pulls each, the
observations between turns masked with ``env_mask``) with the trainer's live model; the reward is the
episode return. The model is the from-scratch tiny Llama after our trainer's format warm-up (so it
answers ``pull[i]`` at all), the same start ``bench_trl.py`` uses. Reported: the mean return per step,
its first and last five steps, the step time, and the share of completion ids that are the
environment's (observations, chat template: masked out of the loss).

Usage: .venv/bin/python bench/bench_trl_env.py [--steps 40] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_trl import warm_tiny
from bench.common import summarize, write_result

HORIZON = 3


def learn(model_dir: Path, steps: int, scratch: Path) -> dict[str, Any]:
    """``steps`` GRPO steps; per step the mean return of its episodes and how long it took."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.episodes import completion
    from agentenvs.integrations.trl import EnvRollout, env_reward

    rollout = EnvRollout("bandit-tiny", env_kwargs={"horizon": HORIZON}, max_tokens=12, concurrency=32)
    returns: list[float] = []
    times: list[float] = []
    masked: list[float] = []

    class Record(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.started)
            records = rollout.last_records
            returns.append(statistics.fmean(float(r.return_) for r in records))
            masks = [completion(r, 0).mask for r in records]
            masked.append(1 - sum(map(sum, masks)) / max(1, sum(map(len, masks))))
            print(f"step {state.global_step}: mean return {returns[-1]:.3f} ({times[-1]:.1f} s)", flush=True)

    args = GRPOConfig(
        output_dir=str(scratch / "trl"),
        max_steps=steps,
        per_device_train_batch_size=32,
        num_generations=8,
        max_completion_length=12,
        learning_rate=3e-4,
        beta=0.0,
        loss_type="dapo",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(model_dir)),
        reward_funcs=[env_reward],
        args=args,
        train_dataset=rollout.dataset(32 * steps, split="train"),
        processing_class=AutoTokenizer.from_pretrained(str(model_dir)),
        rollout_func=rollout,
        callbacks=[Record()],
    )
    trainer.train()
    return {
        "mean_return_per_step": returns,
        "return_first5": statistics.fmean(returns[:5]),
        "return_last5": statistics.fmean(returns[-5:]),
        "step_time": summarize(times[1:]),
        "env_share_of_completion_ids": statistics.fmean(masked),
        "settings": {"horizon": HORIZON, "episodes_per_step": 32, "group_size": 8, "lr": 3e-4, "max_tokens": 12},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps")
    parser.add_argument("--warmup-steps", type=int, help="format warm-up steps (default: the config's)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    import torch

    import agentenvs

    torch.set_num_threads(args.threads)
    agentenvs.register("bandit-tiny", "agentenvs.train.tiny_bandit:TinyBandit", overwrite=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-trl-env-") as scratch:
        model_dir = warm_tiny(Path(scratch), args.threads, args.warmup_steps)
        result = learn(model_dir, args.steps, Path(scratch))
    result["rise"] = result["return_last5"] - result["return_first5"]
    result |= {"trl_version": __import__("trl").__version__, "wall_s": time.perf_counter() - started}
    write_result("trl_env", result)


if __name__ == "__main__":
    main()

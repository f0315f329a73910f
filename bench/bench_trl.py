"""Our GRPO trainer against TRL 1.16's ``GRPOTrainer``, side by side in one process.

Same model (the from-scratch tiny Llama, warmed up once and loaded into both), same reward (one pull
of ``bandit-tiny`` at the same task and seed for every member of a group), same prompts (ours are
templated by the rollout policy; TRL gets the identical text), same group size, completion length,
learning rate, clip range and loss normalisation (token-mean = TRL's ``dapo``), no KL term, one
optimizer step per batch. The two trainers take turns: each TRL step is followed by one of ours
(inside a TRL callback), so both see the same machine load. Reported: median step time, steps/s and
tokens/s (completion tokens generated and trained on, per second), and their ratios.

Then the same comparison for SmolLM2-135M-Instruct (full fine-tuning) on the real bandit prompt,
fewer steps: its step time is the realism check.

Usage: .venv/bin/python bench/bench_trl.py [--steps 12] [--smollm2-steps 3] [--threads 2]
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

from bench.common import summarize, write_result


def play_reward(env_name: str, env_kwargs: dict[str, Any]) -> Any:
    """A TRL reward function: the payoff of the completion's pull at the row's task and seed."""
    import agentenvs

    env = agentenvs.make(env_name, **env_kwargs)

    def reward(completions, task_id, seed, split, **_):
        rewards = []
        for text, task, s, sp in zip(completions, task_id, seed, split, strict=True):
            env.reset(seed=int(s), options={"task_id": task, "split": sp})
            found = env.extract_action(text)
            _, payoff, *_ = env.step(found.action if found else "")
            rewards.append(float(payoff))
        return rewards

    return reward


def prompt_dataset(trainer: Any, steps: int) -> Any:
    """The prompts our policy would see for each group (task, seed) of ``steps`` steps, as TRL rows."""
    from datasets import Dataset

    from agentenvs.rollout.driver import plan_episodes, task_ids
    from agentenvs.rollout.prompting import Conversation, HistoryConfig, system_prompt
    from agentenvs.seeding import derive_seed

    cfg = trainer.config
    env = trainer.local_env()
    description = env.describe()
    rows: dict[str, list] = {"prompt": [], "task_id": [], "seed": [], "split": []}
    for step in range(steps):
        specs = plan_episodes(
            cfg.env.name,
            cfg.env.split,
            cfg.rollout.groups_per_step,
            1,
            seed=derive_seed("trl-bench", step) % (2**31),
            tasks=task_ids(cfg.env.name, cfg.env.split, env),
            shuffle=True,
        )
        for spec in specs:
            observation, _ = env.reset(seed=spec.seed, options={"task_id": spec.task_id, "split": spec.split})
            conversation = Conversation(system_prompt(description), HistoryConfig.parse(cfg.rollout.history))
            text = trainer.tokenizer.apply_chat_template(
                conversation.messages(observation), tokenize=False, add_generation_prompt=True
            )
            rows["prompt"].append(text)
            rows["task_id"].append(spec.task_id)
            rows["seed"].append(spec.seed)
            rows["split"].append(spec.split)
    return Dataset.from_dict(rows)


def compare(name: str, config: Any, model_dir: Path, steps: int, warm_steps: int) -> dict[str, Any]:
    """Interleave ``steps`` TRL steps with ``steps`` of ours; the first ``warm_steps`` of each are not timed."""
    import torch
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.train.trainer import Trainer

    ours = Trainer(config, resume=False)
    rollout = config.rollout
    total = steps + warm_steps
    dataset = prompt_dataset(ours, total)
    ours_times: list[float] = []
    ours_tokens: list[int] = []
    ours_rewards: list[float] = []
    trl_times: list[float] = []
    trl_tokens: list[int] = []
    trl_rewards: list[float] = []

    class Interleave(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            trl_times.append(time.perf_counter() - self.started)
            metrics = ours.train_step()
            ours_times.append(metrics["time/step_s"])
            ours_tokens.append(metrics["batch/generated_tokens"] + metrics["batch/trained_tokens"])
            ours_rewards.append(metrics["reward/mean"])

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                batch = rollout.groups_per_step * rollout.group_size
                trl_tokens.append(int(2 * logs["completions/mean_length"] * batch))  # generated + trained
                trl_rewards.append(float(logs.get("reward", 0.0)))

    with tempfile.TemporaryDirectory(prefix="trl-bench-") as scratch:
        args = GRPOConfig(
            output_dir=scratch,
            max_steps=total,
            per_device_train_batch_size=rollout.groups_per_step * rollout.group_size,
            num_generations=rollout.group_size,
            max_completion_length=rollout.max_tokens,
            temperature=rollout.temperature,
            learning_rate=config.optim.lr,
            adam_beta1=config.optim.betas[0],
            adam_beta2=config.optim.betas[1],
            weight_decay=config.optim.weight_decay,
            max_grad_norm=config.optim.max_grad_norm or 0.0,
            lr_scheduler_type="constant",
            warmup_steps=0,
            epsilon=config.loss.clip_low,
            epsilon_high=config.loss.clip_high,
            loss_type="dapo",
            beta=0.0,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            use_cpu=not torch.cuda.is_available(),
            bf16=False,
            seed=config.run.seed,
            shuffle_dataset=False,
            disable_tqdm=True,
        )
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=play_reward(config.env.name, dict(config.env.kwargs)),
            args=args,
            train_dataset=dataset,
            processing_class=ours.tokenizer,
            callbacks=[Interleave()],
        )
        trainer.train()
    ours.close()
    timed = slice(warm_steps, None)
    ours_stats, trl_stats = summarize(ours_times[timed]), summarize(trl_times[timed])
    ours_tps = sum(ours_tokens[timed]) / sum(ours_times[timed])
    trl_tps = sum(trl_tokens[timed]) / sum(trl_times[timed]) if trl_tokens else float("nan")
    return {
        "name": name,
        "timed_steps": len(ours_times[timed]),
        "ours": {
            **ours_stats,
            "steps_per_s": 1000 / ours_stats["median_ms"],
            "tokens_per_s": ours_tps,
            "reward_first_last": [ours_rewards[0], ours_rewards[-1]],
        },
        "trl": {
            **trl_stats,
            "steps_per_s": 1000 / trl_stats["median_ms"],
            "tokens_per_s": trl_tps,
            "reward_first_last": [trl_rewards[0], trl_rewards[-1]] if trl_rewards else None,
        },
        "speedup_steps_per_s": trl_stats["median_ms"] / ours_stats["median_ms"],
        "speedup_tokens_per_s": ours_tps / trl_tps if trl_tokens else None,
        "settings": {
            "group_size": rollout.group_size,
            "groups_per_step": rollout.groups_per_step,
            "max_tokens": rollout.max_tokens,
            "lr": config.optim.lr,
        },
    }


def tiny_overrides(threads: int) -> list[str]:
    return [f"run.torch_threads={threads}", "run.progress=false", "algorithm.filter_zero_variance=false"]


def warm_tiny(scratch: Path, threads: int, warmup_steps: int | None) -> Path:
    """The tiny model after our trainer's format warm-up (it answers ``pull[i]``), saved in ``scratch``."""
    from agentenvs.train.config import CONFIG_DIR, load_config
    from agentenvs.train.modeling import save_model
    from agentenvs.train.trainer import Trainer

    warm_sets = [f"warmup.steps={warmup_steps}"] if warmup_steps is not None else []
    overrides = [*tiny_overrides(threads), *warm_sets, f"run.out={scratch / 'warm'}"]
    with Trainer(load_config(CONFIG_DIR / "bandit_tiny_cpu.yaml", overrides), resume=False) as trainer:
        trainer.warmup()
        save_model(trainer.model, trainer.tokenizer, scratch / "tiny-warm")
    return scratch / "tiny-warm"


def tiny_case(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """The tiny model on bandit-tiny, both trainers starting from one warmed-up checkpoint."""
    from agentenvs.train.config import CONFIG_DIR, load_config

    base = tiny_overrides(args.threads)
    warm_tiny(scratch, args.threads, args.warmup_steps)
    config = load_config(
        CONFIG_DIR / "bandit_tiny_cpu.yaml",
        [*base, f"run.out={scratch / 'ours'}", f"model.path={scratch / 'tiny-warm'}"],
    )
    return compare("tiny-3.2M/bandit-tiny", config, scratch / "tiny-warm", args.steps, args.warm_steps)


def smollm2_case(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """SmolLM2-135M-Instruct, full fine-tuning, on the real bandit's prompt (2 arms, one pull per episode)."""
    from agentenvs.rollout.smollm2 import smollm2_checkpoint
    from agentenvs.train.config import config_from_dict

    path = smollm2_checkpoint()
    config = config_from_dict(
        {
            "model": {"path": str(path)},
            "env": {"name": "bandit", "split": "train", "max_turns": 1, "tasks": None},
            "rollout": {"groups_per_step": 1, "group_size": 4, "max_tokens": 32, "concurrency": 4, "batch_size": 4},
            "algorithm": {"filter_zero_variance": False},
            "optim": {"lr": 1e-5, "micro_batch_size": 4},
            "run": {"out": str(scratch / "smol"), "torch_threads": args.threads, "progress": False},
        }
    )
    return compare("smollm2-135m/bandit", config, path, args.smollm2_steps, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12, help="timed steps per trainer (tiny model)")
    parser.add_argument("--warm-steps", type=int, default=2, help="untimed first steps per trainer")
    parser.add_argument("--smollm2-steps", type=int, default=3, help="timed SmolLM2 steps per trainer (0: skip)")
    parser.add_argument("--warmup-steps", type=int, help="format warm-up steps of the shared start (default: config)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as scratch:
        cases = [tiny_case(args, Path(scratch))]
        if args.smollm2_steps:
            cases.append(smollm2_case(args, Path(scratch)))
    write_result(
        "trl",
        {
            "cases": cases,
            "trl_version": __import__("trl").__version__,
            "torch_threads": args.threads,
            "wall_s": time.perf_counter() - started,
            "note": "ratios are ours / TRL measured interleaved in one process",
            "speedup_steps_per_s_median": statistics.median(c["speedup_steps_per_s"] for c in cases),
        },
    )


if __name__ == "__main__":
    main()

"""GRPO against GiGPO on multi-turn ``bandit-tiny`` with the tiny model, and GiGPO as it grouped before the fix.

One warm-up (behaviour cloning of the random player), then each contender trains from the same warmed-up
weights with the same seeds, rollouts and steps, interleaved in one process:

- ``grpo``: episode-level advantages only;
- ``gigpo``: step groups of the states the actions were taken in (``StepRecord.anchor``);
- ``gigpo-reached``: step groups of the states the actions *reached* (the info's anchor), as the trainer
  grouped them before records kept the pre-action anchor.

Each repeat trains every contender from the warmed-up weights with its own rollout seed (the tasks and
samples of a step), interleaved, and evaluates it on the 64 held-out tasks (fixed seeds, the same for all)
by the expected payoff of its pulls (the chosen arm's mean, 0 for an invalid pull, summed over the
episode's pulls; 2.4 at most), so Bernoulli noise does not blur the comparison. Short runs compare how fast
each learns: after 30 steps all of them sit near the ceiling. Writes ``bench/results/gigpo.json`` with the
commit that made it.

    python bench/bench_gigpo.py --steps 10 --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import write_result

ROOT = Path(__file__).resolve().parent.parent
CONTENDERS = ("grpo", "gigpo", "gigpo-reached")


def commit() -> str:
    """The checked-out commit, with ``-dirty`` when the work tree differs from it."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    return head + ("-dirty" if dirty.stdout.strip() else "")


def config(seed: int, steps: int, out: str, horizon: int) -> Any:
    from agentenvs.train.config import config_from_dict

    return config_from_dict(
        {
            "model": {"path": "tiny"},
            "env": {
                "name": "bandit-tiny",
                "entry_point": "agentenvs.train.tiny_bandit:TinyBandit",
                "kwargs": {"horizon": horizon},
                "eval_groups": 64,
            },
            "rollout": {"groups_per_step": 8, "group_size": 8, "max_tokens": 12, "concurrency": 64, "batch_size": 64},
            "warmup": {"steps": 100, "episodes": 128, "lr": 1e-3},
            "algorithm": {"gamma": 0.95, "filter_zero_variance": True},
            "loss": {"clip_low": 0.2, "clip_high": 0.28},
            "optim": {"lr": 3e-4, "micro_batch_size": 64},
            "run": {"steps": steps, "seed": seed, "out": out, "progress": False, "torch_threads": 2},
        }
    )


def expected_payoff(records: list[Any]) -> float:
    """Mean over episodes of the summed expected payoff of their pulls."""
    from agentenvs.train.tiny_bandit import GOOD_MEAN

    def pull(step: Any) -> float:
        return GOOD_MEAN - step.info["metrics"]["step_regret"] if step.info.get("action_valid") is True else 0.0

    return statistics.fmean(sum(pull(s) for s in r.steps) for r in records)


def reached_states(record: Any, use_text: bool = False) -> list[str]:
    """The grouping before the fix: each action keyed by the anchor of the state it reached."""
    return [s.observation if use_text else str(s.info.get("anchor", s.observation)) for s in record.steps]


def train(trainer: Any, contender: str, warm: dict[str, Any], steps: int) -> dict[str, Any]:
    """Train ``contender`` from the warmed-up weights; its held-out payoff before and after."""
    import torch

    from agentenvs.train import advantages

    trainer.model.load_state_dict(warm)
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=trainer.config.optim.lr, betas=(0.9, 0.99))
    trainer.updater.optimizer = trainer.optimizer
    trainer.step = 0
    trainer.config.algorithm.estimator = "grpo" if contender == "grpo" else "gigpo"
    original = advantages.action_states
    if contender == "gigpo-reached":
        advantages.action_states = reached_states
    started = time.perf_counter()
    try:
        rewards = [trainer.train_step()["reward/mean"] for _ in range(steps)]
    finally:
        advantages.action_states = original
    return {
        "held_out_expected_payoff": expected_payoff(trainer.evaluation_records()),
        "train_reward_first_5": statistics.fmean(rewards[:5]),
        "train_reward_last_5": statistics.fmean(rewards[-5:]),
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from agentenvs.train.trainer import Trainer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="RL steps per contender (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats, each with its own rollout seed (default 3)")
    parser.add_argument("--horizon", type=int, default=3, help="pulls per episode (default 3)")
    args = parser.parse_args(argv)
    runs = []
    with Trainer(config(0, args.steps, tempfile.mkdtemp(), args.horizon), resume=False) as trainer:
        trainer.warmup()
        warm = copy.deepcopy(trainer.model.state_dict())
        before = expected_payoff(trainer.evaluation_records())
        for seed in range(args.repeats):
            trainer.config.run.seed = seed
            row: dict[str, Any] = {"seed": seed}
            for contender in CONTENDERS:
                row[contender] = train(trainer, contender, warm, args.steps)
                print(seed, contender, row[contender], flush=True)
            runs.append(row)
    summary = {
        contender: statistics.fmean(r[contender]["held_out_expected_payoff"] for r in runs) for contender in CONTENDERS
    }
    write_result(
        "gigpo",
        {
            "commit": commit(),
            "command": "python bench/bench_gigpo.py " + " ".join(argv or sys.argv[1:]),
            "steps": args.steps,
            "horizon": args.horizon,
            "warmed_up_held_out_expected_payoff": before,
            "runs": runs,
            "mean_held_out_expected_payoff": summary,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

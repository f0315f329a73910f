"""``agentenvs train``: run the reference GRPO trainer from a config file."""

from __future__ import annotations

import argparse
import json

from agentenvs.train.config import CONFIG_DIR

EPILOG = f"""\
examples:
  agentenvs train --config {CONFIG_DIR / "bandit_tiny_cpu.yaml"}
  agentenvs train --config my.yaml --set run.steps=50 --set rollout.group_size=16
  agentenvs train --config my.yaml --eval-only          (evaluate the last checkpoint)

A config has the sections model, env, rollout, algorithm, warmup, loss, optim, vllm and run; every
setting has a default (docs/train.md lists them). Outputs go to run.out: metrics.jsonl, curves.png,
config.json and checkpoints/step-N. Starting again with the same run.out resumes from the last
checkpoint; --fresh starts over.
"""


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--config", help=f"YAML or JSON config (examples in {CONFIG_DIR})")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. run.steps=20 (repeatable; values are parsed as JSON when they parse)",
    )
    parser.add_argument("--out", help="output folder (same as --set run.out=...)")
    parser.add_argument("--fresh", action="store_true", help="ignore checkpoints in the output folder and start over")
    parser.add_argument("--eval-only", action="store_true", help="only evaluate (env.eval_split, env.eval_groups)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")


def run(args: argparse.Namespace) -> int:
    from agentenvs.errors import AgentEnvsError
    from agentenvs.train.config import load_config

    overrides = list(args.overrides) + ([f"run.out={json.dumps(args.out)}"] if args.out else [])
    try:
        config = load_config(args.config, overrides)
    except AgentEnvsError as exc:
        print(f"agentenvs train: {exc}")
        return 2
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    from agentenvs.train.trainer import Trainer

    with Trainer(config, resume=not args.fresh) as trainer:
        if args.eval_only:
            groups = config.env.eval_groups or 32
            print(json.dumps(trainer.evaluate(groups=groups), indent=2, sort_keys=True))
            return 0
        history = trainer.train()
    last = history[-1] if history else {}
    summary = {k: last[k] for k in ("step", "reward/mean", "success/rate", "perf/tokens_per_s") if k in last}
    print(json.dumps(summary, sort_keys=True))
    print(f"metrics: {trainer.log.path}  curves: {trainer.out / 'curves.png'}")
    return 0

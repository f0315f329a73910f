"""The ``agentenvs`` command line.

Each subcommand lives in its own module with ``configure(parser)`` and ``run(args) -> int``; only the
module of the subcommand being run is imported, so ``agentenvs list`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("agentenvs.cli_envs", "list the registered environments"),
    "describe": ("agentenvs.cli_envs", "show an environment's splits, limits, action format and instructions"),
    "play": ("agentenvs.cli_envs", "play an environment yourself in the terminal"),
    "new-env": ("agentenvs.scaffold", "write a new environment's skeleton that passes the conformance suite"),
    "tasks": ("agentenvs.tasks.cli", "build task datasets: agentenvs tasks build shellops --repo PATH --n N --out DIR"),
    "serve": ("agentenvs.servers.cli", "serve environments over HTTP (protocol v1)"),
    "index": ("agentenvs.retrieval.cli", "build a retriever index (bm25, dense, hybrid) from a Search-R1 corpus"),
    "serve-retriever": ("agentenvs.servers.retriever_cli", "serve Search-R1's /retrieve API over an index folder"),
    "rollout": ("agentenvs.rollout.cli", "run episodes with a policy and write episode records"),
    "eval": ("agentenvs.evaluation.cli", "evaluate a policy on a panel and write versioned results"),
    "leaderboard": ("agentenvs.evaluation.cli", "build the leaderboard pages from results"),
    "forecast": ("agentenvs.tasks.forecast.cli", "advance the simulated clock, resolve or void stored predictions"),
    "train": ("agentenvs.train.cli", "train a policy with the reference GRPO trainer"),
    "integrations": ("agentenvs.integrations.cli", "other trainers (TRL, verl, SkyRL, OpenRLHF): write their datasets"),
}
"""Subcommand name to (module, one-line help). A module serves several names through ``args.command``."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentenvs",
        description="Multi-turn text environments for LLM agents: list, play, serve, roll out, evaluate, train.",
        epilog="Run `agentenvs COMMAND --help` for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).configure(child, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:  # `agentenvs list | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``agentenvs tasks build ENV ...``: run an environment's task builder (``agentenvs.tasks.ENV.build``)."""

from __future__ import annotations

import argparse
import importlib


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("action", choices=["build"], help="build: mine verified tasks")
    parser.add_argument("env", help="the environment whose builder runs (shellops)")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the builder's options (see ... --help)")


def run(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module(f"agentenvs.tasks.{args.env}.build")
    except ModuleNotFoundError:
        print(f"agentenvs tasks: {args.env} has no task builder (agentenvs.tasks.{args.env}.build)")
        return 2
    return int(module.main(args.options))

"""``agentenvs eval`` and ``agentenvs leaderboard``: evaluate a policy, re-score stored episodes, render pages."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentenvs.errors import AgentEnvsError, InvalidArgument

EVAL_EPILOG = """\
examples:
  agentenvs eval --env bandit --policy random --k 4 --out runs/bandit-random
  agentenvs eval --env alfworld --split valid_unseen --policy smollm2 --k 2 --limit 6 --out runs/alf-smol
  agentenvs eval --env alfworld --split valid_seen --policy openai:http://127.0.0.1:8000/v1:Qwen2.5-7B-Instruct \\
      --k 4 --servers http://127.0.0.1:8100,http://127.0.0.1:8101 --out runs/alf-qwen
  agentenvs eval --rescore runs/alf-qwen/episodes.jsonl --out rescored/

Run it again with the same --out to resume: finished (task, sample) pairs are kept and skipped.
The run writes OUT/episodes.jsonl (one record per episode), OUT/run.json (its settings) and
OUT/results.json (schema agentenvs.results/1; docs/evaluation.md defines every number).
"""

LEADERBOARD_EPILOG = """\
examples:
  agentenvs leaderboard build                                  # the results that ship with agentenvs
  agentenvs leaderboard build --results runs/ --out site/      # every results.json below runs/
Then open OUT/index.html in a browser (it needs no network) or read OUT/leaderboard.md.
"""


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if name == "eval":
        _configure_eval(parser)
    else:
        _configure_leaderboard(parser)


def _configure_eval(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EVAL_EPILOG
    parser.add_argument("--env", help="environment name (`agentenvs list` shows them)")
    parser.add_argument("--split", help="panel split to evaluate on (default: the environment's default split)")
    parser.add_argument(
        "--policy",
        default="smollm2",
        help="policy spec: smollm2 (default, the embedded model), expert, random, openai:URL[:model], hf:PATH",
    )
    parser.add_argument("--k", type=int, default=4, help="samples per task; pass@k is reported for 1, 2, 4, ..., k")
    parser.add_argument(
        "--limit", type=int, help="evaluate only N tasks, taken round-robin over task types in panel order"
    )
    parser.add_argument("--servers", help="comma-separated environment server URLs (default: run in-process)")
    parser.add_argument("--out", type=Path, help="run folder: episodes, settings and results go here (resumable)")
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment constructor keyword, VALUE as JSON (e.g. admissible_actions=true); repeatable",
    )
    parser.add_argument("--max-turns", type=int, help="turn limit per episode (default: the environment's)")
    parser.add_argument("--concurrency", type=int, default=4, help="episodes played at once (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="run seed: episode and sampling seeds derive from it")
    parser.add_argument("--time-limit", type=float, help="seconds per episode (past it: failure_cause timeout)")
    parser.add_argument("--temperature", type=float, default=1.0, help="model sampling temperature (default 1.0)")
    parser.add_argument("--top-p", type=float, default=1.0, help="model nucleus sampling (default 1.0)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens per model response (default 128)")
    parser.add_argument("--stop", action="append", help="stop string for model responses (repeatable)")
    parser.add_argument("--history", default="full", help="'full' or 'last:K' turns in the prompt (default full)")
    parser.add_argument("--mode", choices=("completions", "chat"), help="openai policies: the API to use")
    parser.add_argument("--tokenizer", help="openai policies: tokenizer folder for token-in prompts")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples for the 95%% intervals")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--rescore",
        nargs="+",
        type=Path,
        metavar="EPISODES",
        help="score stored episode files or folders instead of running anything; results go to --out",
    )


def _configure_leaderboard(parser: argparse.ArgumentParser) -> None:
    parser.epilog = LEADERBOARD_EPILOG
    parser.add_argument("action", choices=["build"], help="build: render leaderboard.md and index.html")
    parser.add_argument(
        "--results",
        type=Path,
        help="folder searched for results JSON (default: the leaderboard shipped in the package)",
    )
    parser.add_argument("--out", type=Path, help="output folder (default: $XDG_CACHE_HOME/agentenvs/leaderboard)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "leaderboard":
            return _run_leaderboard(args)
        if args.rescore:
            return _run_rescore(args)
        return _run_eval(args)
    except AgentEnvsError as exc:
        print(f"agentenvs {args.command}: {exc}", file=sys.stderr)
        return 2


def _run_eval(args: argparse.Namespace) -> int:
    from agentenvs.evaluation.runner import EvalConfig, evaluate

    if not args.env or not args.out:
        print("agentenvs eval: --env and --out are needed (or --rescore FILES --out DIR)", file=sys.stderr)
        return 2
    config = EvalConfig(
        env=args.env,
        split=args.split,
        policy=args.policy,
        k=args.k,
        limit=args.limit,
        servers=[url for url in (args.servers or "").split(",") if url],
        max_turns=args.max_turns,
        concurrency=args.concurrency,
        seed=args.seed,
        time_limit_s=args.time_limit,
        sampling=sampling_options(args),
        env_kwargs=env_kwargs(args.env_arg),
    )
    path = evaluate(config, args.out, progress=not args.no_progress, resamples=args.resamples)
    print_summary(json.loads(path.read_text(encoding="utf-8")))
    print(f"results: {path}")
    return 0


def env_kwargs(pairs: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` pairs with JSON values (a bare word stays a string)."""
    kwargs: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--env-arg {pair!r} is not KEY=VALUE, for example admissible_actions=true")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def sampling_options(args: argparse.Namespace) -> dict[str, object]:
    """The ``make_policy`` keywords the command line sets (model policies use them; others ignore them)."""
    options: dict[str, object] = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "history": args.history,
    }
    if args.stop:
        options["stop"] = list(args.stop)
    if args.policy.startswith("openai:"):
        options.update({k: v for k, v in (("mode", args.mode), ("tokenizer", args.tokenizer)) if v is not None})
    return options


def _run_rescore(args: argparse.Namespace) -> int:
    from agentenvs.evaluation.runner import rescore_to_results

    if not args.out:
        print("agentenvs eval --rescore: give --out DIR for the results files", file=sys.stderr)
        return 2
    for path in rescore_to_results(args.rescore, args.out, resamples=args.resamples):
        print_summary(json.loads(path.read_text(encoding="utf-8")))
        print(f"results: {path}")
    return 0


def _run_leaderboard(args: argparse.Namespace) -> int:
    from agentenvs.evaluation.leaderboard import build, committed_dir, default_site_dir

    pages = build(args.results or committed_dir(), args.out or default_site_dir())
    print(f"leaderboard: {pages['markdown']}")
    print(f"open in a browser: {pages['html'].resolve().as_uri()}")
    return 0


def print_summary(result: dict) -> None:
    """One line per headline number of a results document."""
    from agentenvs.evaluation.leaderboard import fmt_estimate

    metrics = result["metrics"]
    env = result["env"]
    print(
        f"{env['name']} {env['split']} · {result['policy_label']} · {result['counts']['tasks']} tasks x "
        f"{result['counts']['samples_per_task']['min']} samples"
    )
    print(f"  success % {fmt_estimate(metrics['success_rate'])}   score % {fmt_estimate(metrics['mean_score'])}")
    print("  " + "   ".join(f"pass@{k} {v['value'] * 100:.1f}" for k, v in metrics["pass_at_k"].items()))

"""``agentenvs rollout``: play episodes with a policy and write episode records (JSONL)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentenvs.errors import AgentEnvsError
from agentenvs.rollout.factory import SPECS

EPILOG = """\
policies (--policy):
  random               a seeded choice among the admissible actions
  expert               the environment's privileged plan (the env is made with privileged=True)
  smollm2              the embedded SmolLM2-135M-Instruct on this machine's CPU/GPU (converted once into
                       $XDG_CACHE_HOME/agentenvs/models/)
  hf:PATH              a local transformers checkpoint folder
  openai:URL[:model]   an OpenAI-compatible server (vLLM: token ids in and out), e.g.
                       openai:http://127.0.0.1:8000/v1:smollm2

--n counts groups: the run holds N x G episodes; the G episodes of a group share task and seed.
Records go to DIR/episodes.jsonl (schema agentenvs.episode/2, see docs/rollout.md); a run that is
started again with the same arguments skips the episodes already there (a half-written last line left by
a crash is cut off); a DIR holding episodes of another env version, panel or policy is refused, and
--no-resume starts the file over. DIR/summary.json sums it up.

examples:
  agentenvs rollout --env bandit --policy random --n 20 --group-size 4 --out runs/random
  agentenvs rollout --env bandit --policy smollm2 --n 2 --max-turns 5 --out runs/smol
  agentenvs rollout --env bandit --policy openai:http://127.0.0.1:8000/v1 --servers http://127.0.0.1:8123 --out runs/v
"""


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--env", required=True, help="environment name (`agentenvs list`)")
    parser.add_argument("--policy", required=True, help=f"one of: {', '.join(SPECS)}")
    parser.add_argument("--n", type=int, default=1, help="number of groups (tasks drawn from the split); default 1")
    parser.add_argument("--group-size", type=int, default=1, help="rollouts per group (G); default 1")
    parser.add_argument("--split", default=None, help="task split (default: the environment's default split)")
    parser.add_argument("--seed", type=int, default=0, help="run seed: fixes episode seeds and sampling seeds")
    parser.add_argument("--shuffle", action="store_true", help="draw tasks in a seeded random order, not panel order")
    parser.add_argument("--servers", default=None, help="comma-separated environment server URLs (default: in-process)")
    parser.add_argument("--out", required=True, type=Path, help="output folder for episodes.jsonl and summary.json")
    parser.add_argument("--concurrency", type=int, default=8, help="episodes played at once (default 8)")
    parser.add_argument(
        "--schedule",
        choices=("auto", "threads", "rounds"),
        default="auto",
        help="threads: an episode per thread; rounds: all ready episodes of a server in one batch step "
        "(needs --servers); auto (default): rounds for scripted policies on servers, threads otherwise",
    )
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per episode (failure_cause timeout)")
    parser.add_argument("--max-turns", type=int, default=None, help="cap on turns per episode")
    parser.add_argument("--temperature", type=float, default=1.0, help="model sampling temperature; 0 is greedy")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0: off)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens per model response (default 128)")
    parser.add_argument("--history", default="full", help="'full' or 'last:K' turns in the prompt (default full)")
    parser.add_argument("--mode", choices=("completions", "chat"), default=None, help="openai policies: API to use")
    parser.add_argument("--tokenizer", default=None, help="openai policies: tokenizer folder for token-in prompts")
    parser.add_argument("--no-resume", action="store_true", help="run every episode even if DIR already has it")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except AgentEnvsError as exc:  # a usage problem (a folder of another run, a bad spec): say it, no traceback
        print(f"agentenvs rollout: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from agentenvs.rollout.driver import RolloutConfig, run_rollouts
    from agentenvs.rollout.factory import make_policy

    options: dict[str, Any] = {}
    if args.policy.startswith("openai:"):
        options = {k: v for k, v in (("mode", args.mode), ("tokenizer", args.tokenizer)) if v is not None}
    policy = make_policy(
        args.policy,
        seed=args.seed,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        history=args.history,
        **options,
    )
    config = RolloutConfig(
        concurrency=args.concurrency,
        schedule=args.schedule,
        time_limit_s=args.time_limit,
        max_turns=args.max_turns,
        progress=not args.no_progress,
    )
    servers = [u.strip() for u in args.servers.split(",") if u.strip()] if args.servers else None
    started = time.monotonic()
    try:
        records = run_rollouts(
            args.env,
            policy,
            n=args.n,
            group_size=args.group_size,
            split=args.split,
            seed=args.seed,
            servers=servers,
            config=config,
            out=args.out,
            resume=not args.no_resume,
        )
    finally:
        policy.close()
    summary = summarize(records, time.monotonic() - started)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2, sort_keys=True))
    print(f"wrote {args.out / 'episodes.jsonl'}")
    return 0


def summarize(records: list[Any], wall_s: float) -> dict[str, Any]:
    """Counts a person reads after a run; scoring proper is `agentenvs eval`'s job."""
    count = len(records)
    return {
        "episodes": count,
        "success_rate": sum(r.success for r in records) / count if count else 0.0,
        "mean_score": sum(r.score for r in records) / count if count else 0.0,
        "mean_turns": sum(r.num_turns for r in records) / count if count else 0.0,
        "failure_causes": dict(Counter(r.failure_cause for r in records)),
        "wall_s": round(wall_s, 3),
    }

"""``make demo``: the whole loop on one machine in a few minutes, on CPU.

1. start an environment server on a loopback port (``servers/launch.py``) for every environment
   whose engine is installed;
2. evaluate the embedded default policy (SmolLM2-135M-Instruct, zero-shot) and the random and expert
   baselines on small panels, through that server (the ``demo`` plan of ``baselines.py``);
3. build the leaderboard (markdown and a self-contained HTML page) and print where to open it.

Runs go to ``$XDG_CACHE_HOME/agentenvs/evaluation/demo/`` and resume if interrupted; a run whose
identity changed (an upgraded environment, a regenerated panel, another model) starts over on its
own, and ``--fresh`` starts everything over.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from agentenvs.evaluation.baselines import PLANS, run_plan, unavailable
from agentenvs.evaluation.leaderboard import build, cache_dir, fmt_estimate, load_results


def summary_table(results: Path) -> str:
    """The leaderboard in a few terminal lines: env, split, policy, success and score with intervals."""
    rows = [("env", "split", "policy", "success % [95% CI]", "score % [95% CI]", "pass@k")]
    for entry in sorted(load_results(results), key=lambda e: (e.env, e.split, -e.metrics["success_rate"]["value"])):
        top = entry.metrics["pass_at_k"][str(entry.max_k)]["value"] * 100
        rows.append(
            (
                entry.env,
                entry.split,
                entry.label,
                fmt_estimate(entry.metrics["success_rate"]),
                fmt_estimate(entry.metrics["mean_score"]),
                f"{top:.1f} (k={entry.max_k})",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=cache_dir() / "demo", help="demo folder (default: the cache)")
    parser.add_argument("--fresh", action="store_true", help="delete earlier demo runs and start over")
    parser.add_argument("--workers", type=int, default=2, help="environment worker processes of the server")
    parser.add_argument("--envs", help="comma-separated environments to include (default: every available one)")
    parser.add_argument("--policies", help="comma-separated policies to include (default: smollm2,random,expert)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    plan = [
        p
        for p in PLANS["demo"]
        if (not args.envs or p.env in args.envs.split(","))
        and (not args.policies or p.policy in args.policies.split(","))
    ]
    envs = sorted({p.env for p in plan})
    missing = {env: reason for env in envs if (reason := unavailable(env))}
    for env, reason in missing.items():
        print(f"demo: {env} is not available here and is left out ({reason})")
    served = [env for env in envs if env not in missing]
    if not served:
        print("demo: no environment is available; run `make install`", file=sys.stderr)
        return 1

    from agentenvs.servers.launch import launch_server

    print(f"demo: starting an environment server for {', '.join(served)}")
    with launch_server(served, workers=args.workers, timeout=180) as server:
        print(f"demo: server at {server.url} (pid {server.pid})")
        results = run_plan(
            plan,
            args.out / "runs",
            servers=[server.url],
            progress=not args.no_progress,
            skip=set(missing),
            fresh_on_mismatch=True,
        )
    pages = build(args.out / "runs", args.out / "site")
    wall = time.monotonic() - started
    print()
    print(summary_table(args.out / "runs"))
    print()
    print(f"demo: {len(results)} evaluations in {wall:.0f} s wall time")
    print(f"demo: leaderboard markdown: {pages['markdown']}")
    print(f"demo: open the leaderboard in a browser: {pages['html'].resolve().as_uri()}")
    (args.out / "demo.json").write_text(
        json.dumps({"wall_time_s": round(wall, 1), "results": [str(p) for p in results]}, indent=2) + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

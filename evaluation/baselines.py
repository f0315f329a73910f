"""The baseline runs behind the leaderboard and the demo: random, expert and SmolLM2 zero-shot.

``python -m agentenvs.evaluation.baselines --out DIR [--publish evaluation/leaderboard]`` runs the
``leaderboard`` plan (each run resumable in ``DIR/RUN_ID``) and, with ``--publish``, copies every
results file to ``PUBLISH/RUN_ID.json``, which is how the committed leaderboard is refreshed. The demo
runs the smaller ``demo`` plan through an environment server.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentenvs
from agentenvs.errors import AgentEnvsError
from agentenvs.evaluation.runner import EvalConfig, evaluate

SMOLLM2 = {"temperature": 0.7, "max_tokens": 24, "stop": ["</action>"], "history": "last:0"}
"""SmolLM2-135M zero-shot: short answers that stop at the action, and a prompt of the task and the
current observation only (bandit and ALFWorld observations carry the state), keep a CPU run to minutes."""


FORECAST_RESOLVED = {"mode": "resolved"}
"""Forecast baselines score at once against the panel's known outcomes (the pending mode's reward is 0)."""


@dataclass(frozen=True)
class Planned:
    """One baseline run (an ``EvalConfig`` without servers)."""

    env: str
    policy: str
    k: int
    limit: int | None
    split: str | None = None
    max_turns: int | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 4

    def config(self, servers: Sequence[str] = ()) -> EvalConfig:
        return EvalConfig(
            env=self.env,
            policy=self.policy,
            split=self.split,
            k=self.k,
            limit=self.limit,
            max_turns=self.max_turns,
            sampling=dict(self.sampling),
            env_kwargs=dict(self.env_kwargs),
            concurrency=self.concurrency,
            servers=tuple(servers),
        )


FORECAST = (
    *(
        Planned("forecast", policy, k=1, limit=None, env_kwargs=FORECAST_RESOLVED)
        for policy in ("expert", "baseline:base_rate", "baseline:half")
    ),
    Planned("forecast", "smollm2", k=1, limit=12, max_turns=4, sampling=SMOLLM2, env_kwargs=FORECAST_RESOLVED),
)
"""Oracle (the simulator's probability, as ``expert``), base rate, always 0.5, and SmolLM2 zero-shot."""

SEARCHQA = (
    Planned("searchqa", "expert", k=1, limit=None, split="test"),
    Planned("searchqa", "baseline:no-search", k=1, limit=None, split="test"),
    Planned(
        "searchqa",
        "smollm2",
        k=1,
        limit=12,
        split="test",
        sampling={**SMOLLM2, "stop": ["</search>", "</answer>"], "max_tokens": 48},
    ),
)
"""The expert (golden sub-queries, answers read from the retrieved text), answering without searching,
and SmolLM2 zero-shot, whose responses stop at Search-R1's closing tags."""

SHELLOPS = (
    Planned("shellops", "expert", k=1, limit=None, split="test"),
    Planned("shellops", "baseline:random", k=1, limit=None, split="test"),
    Planned(
        "shellops",
        "smollm2",
        k=1,
        limit=12,
        split="test",
        sampling={**SMOLLM2, "stop": ["</bash>", "</submit>"], "max_tokens": 48},
    ),
)
"""The reference solution, a random command of a fixed menu (the environment's ``baseline_actions``: a
shell lists no admissible actions, so it runs as ``baseline:random``, one sample a task, since every
sample of a task starts from the same seed) and SmolLM2 zero-shot, stopping at the closing tags."""

PLANS: dict[str, tuple[Planned, ...]] = {
    "leaderboard": (
        Planned("bandit", "random", k=4, limit=None),
        Planned("bandit", "expert", k=4, limit=None),
        Planned("bandit", "smollm2", k=2, limit=6, sampling=SMOLLM2),
        Planned("alfworld", "random", k=2, limit=None, split="valid_seen"),
        Planned("alfworld", "expert", k=1, limit=None, split="valid_seen"),
        Planned("alfworld", "random", k=2, limit=None, split="valid_unseen"),
        Planned("alfworld", "expert", k=1, limit=None, split="valid_unseen"),
        Planned("alfworld", "smollm2", k=1, limit=12, split="valid_unseen", max_turns=20, sampling=SMOLLM2),
        Planned("sciworld", "random", k=2, limit=30, max_turns=50, env_kwargs={"admissible_actions": True}),
        Planned("sciworld", "expert", k=1, limit=None),
        Planned("textworld", "random", k=2, limit=None, split="test"),
        Planned("textworld", "expert", k=1, limit=None, split="test"),
        Planned("textworld", "smollm2", k=1, limit=12, split="test", max_turns=20, sampling=SMOLLM2),
        Planned("webshop", "random", k=2, limit=None, split="test"),
        Planned("webshop", "expert", k=1, limit=None, split="test"),
        Planned("webshop", "expert", k=1, limit=None, split="test_heldout"),
        Planned("webshop", "smollm2", k=1, limit=12, split="test", sampling=SMOLLM2),
        *SEARCHQA,
        *FORECAST,
        *SHELLOPS,
    ),
    "demo": (
        Planned("bandit", "random", k=4, limit=12),
        Planned("bandit", "expert", k=4, limit=12),
        Planned("bandit", "smollm2", k=2, limit=1, max_turns=10, sampling=SMOLLM2),
        Planned("alfworld", "random", k=2, limit=6, split="valid_unseen", max_turns=20),
        Planned("alfworld", "expert", k=1, limit=6, split="valid_unseen"),
        Planned("alfworld", "smollm2", k=1, limit=2, split="valid_unseen", max_turns=8, sampling=SMOLLM2),
    ),
}


def unavailable(env: str) -> str | None:
    """Why an environment cannot be evaluated here (its engine or panels missing), or None."""
    try:
        agentenvs.describe(env)
    except (AgentEnvsError, ImportError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def run_plan(
    plan: Sequence[Planned],
    out: Path,
    *,
    servers: Sequence[str] = (),
    progress: bool = True,
    skip: set[str] | None = None,
    fresh_on_mismatch: bool = False,
) -> list[Path]:
    """Run every planned evaluation whose environment is available; returns the results files.

    ``fresh_on_mismatch``: a run folder left by another identity (an older env version, panel or
    model) is started over instead of stopping with an error (see ``evaluate``)."""
    from agentenvs.evaluation.cli import print_summary
    from agentenvs.evaluation.runner import run_id

    missing = {p.env: unavailable(p.env) for p in plan if p.env not in (skip or set())}
    written = []
    for planned in plan:
        if planned.env in (skip or set()) or missing.get(planned.env):
            reason = "skipped" if planned.env in (skip or set()) else missing[planned.env]
            print(f"-- {planned.env} {planned.policy}: not evaluated ({reason})")
            continue
        config = planned.config(servers)
        split = planned.split or agentenvs.describe(planned.env)["default_split"]
        folder = out / run_id(config, split, {"name": planned.policy})
        print(f"-- {planned.env} {planned.split or ''} {planned.policy} k={planned.k} limit={planned.limit}")
        path = evaluate(config, folder, progress=progress, fresh_on_mismatch=fresh_on_mismatch)
        print_summary(json.loads(path.read_text(encoding="utf-8")))
        written.append(path)
    return written


def publish(results: Sequence[Path], folder: Path) -> list[Path]:
    """Copy results files to ``folder/RUN_ID.json`` (the committed leaderboard)."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for path in results:
        target = folder / f"{json.loads(path.read_text(encoding='utf-8'))['run_id']}.json"
        shutil.copyfile(path, target)
        copies.append(target)
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plan", choices=sorted(PLANS), default="leaderboard", help="which runs (default leaderboard)")
    parser.add_argument("--out", type=Path, required=True, help="folder of the runs (resumable)")
    parser.add_argument("--publish", type=Path, help="copy the results files here as RUN_ID.json")
    parser.add_argument("--env", action="append", help="only these environments (repeatable)")
    parser.add_argument("--servers", help="comma-separated environment server URLs (default: in-process)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    plan = [p for p in PLANS[args.plan] if not args.env or p.env in args.env]
    servers = [url for url in (args.servers or "").split(",") if url]
    results = run_plan(plan, args.out, servers=servers, progress=not args.no_progress)
    if args.publish:
        for path in publish(results, args.publish):
            print(f"published {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

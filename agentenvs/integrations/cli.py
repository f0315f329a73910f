"""``agentenvs integrations``: write a trainer's dataset of our episodes, list the adapters.

Every adapter reads which episode a row stands for from the row itself (docs/integrations.md); this
writes those rows in the file each trainer loads, so no glue is needed between ``agentenvs`` and it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from agentenvs.errors import AgentEnvsError, InvalidArgument

ADAPTERS = {
    "trl": ("agentenvs.integrations.trl", "trl", "GRPOTrainer(rollout_func=EnvRollout(ENV), train_dataset=...)"),
    "verl": ("agentenvs.integrations.verl", "verl", "data.train_files=FILE.parquet, agent loop 'agentenvs'"),
    "skyrl": ("agentenvs.integrations.skyrl", "skyrl", "env_class 'agentenvs' (register_skyrl())"),
    "openrlhf": ("agentenvs.integrations.openrlhf", "openrlhf", "--train.agent_func_path $(python -m ...openrlhf)"),
}
"""Trainer to (adapter module, extra, how the trainer uses it)."""


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="the adapters, their extras and how each trainer uses them")
    data = sub.add_parser(
        "dataset",
        help="write a trainer's dataset whose rows name our episodes (parquet or jsonl by the file's suffix)",
        description="Example: agentenvs integrations dataset verl alfworld --n 512 --split train --out train.parquet",
    )
    data.add_argument("trainer", choices=sorted(ADAPTERS), help="the trainer that reads the file")
    data.add_argument("env", help="a registered environment (see `agentenvs list`)")
    data.add_argument("--n", type=int, required=True, help="rows: tasks shuffled by --seed and cycled, one seed each")
    data.add_argument("--split", help="the split (default: the environment's default split)")
    data.add_argument("--seed", type=int, default=0, help="shuffles the tasks and seeds the episodes")
    data.add_argument("--env-kwargs", default="{}", help="constructor keywords as JSON, e.g. '{\"max_turns\": 30}'")
    data.add_argument("--out", type=Path, required=True, help="FILE.parquet (verl, SkyRL) or FILE.jsonl")


def write_rows(rows: list[dict], out: Path) -> None:
    """Parquet (what verl's and SkyRL's datasets read) or JSON lines (OpenRLHF, TRL's ``load_dataset``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), out)
    else:
        out.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        for trainer, (module, extra, usage) in ADAPTERS.items():
            print(f"{trainer:9} {module:34} pip install 'agentenvs[{extra}]'   {usage}")
        print("openenv   servers/openenv.py (agentenvs serve)   pip install 'agentenvs[openenv]'   /openenv/ENV/ws")
        return 0
    try:
        write_dataset(args)
    except AgentEnvsError as exc:  # a usage problem (a missing extra, a bad suffix): say it, no traceback
        print(f"agentenvs integrations: {exc}", file=sys.stderr)
        return 2
    return 0


def write_dataset(args: argparse.Namespace) -> None:
    if args.out.suffix not in (".parquet", ".jsonl", ".json"):
        raise InvalidArgument(f"--out {args.out}: name a .parquet or a .jsonl file")
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except ValueError as exc:
        raise InvalidArgument(f"--env-kwargs must be a JSON object: {exc}") from exc
    adapter = importlib.import_module(ADAPTERS[args.trainer][0])
    rows = adapter.dataset_rows(args.env, args.n, split=args.split, seed=args.seed, env_kwargs=env_kwargs)
    write_rows(rows, args.out)
    print(f"wrote {len(rows)} {args.trainer} rows of {args.env} to {args.out}")

"""``agentenvs forecast advance|resolve|void|status``: the lifecycle of stored predictions (docs/forecast.md)."""

from __future__ import annotations

import argparse
import json
import os

from agentenvs.errors import InvalidArgument
from agentenvs.forecast_scores import reliability


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    default = os.environ.get("AGENTENVS_FORECAST_STORE", "predictions.sqlite")
    parser.add_argument("action", choices=["advance", "resolve", "void", "status"])
    parser.add_argument("--store", default=default, help="the prediction store ($AGENTENVS_FORECAST_STORE)")
    parser.add_argument("--ticks", type=int, default=1, help="advance: ticks to move the simulated clock")
    parser.add_argument("--question", help="resolve: every pending prediction of this question id")
    parser.add_argument("--id", help="resolve/void: one prediction by resolution_id")
    parser.add_argument("--outcome", help='resolve: the outcome as JSON (1, 0, "option", 101.5)')
    parser.add_argument("--reason", default="", help="void: why the question was annulled")


def run(args: argparse.Namespace) -> int:
    from agentenvs.predictions import PredictionStore
    from agentenvs.tasks.forecast.resolver import advance

    store = PredictionStore(args.store)
    try:
        if args.action == "advance":
            result = advance(store, args.ticks)
        elif args.action == "status":
            result = _status(store)
        elif args.action == "void":
            result = {"voided": store.void(_need(args.id, "--id"), args.reason)}
        else:
            outcome = json.loads(_need(args.outcome, "--outcome"))
            if args.id:
                result = {"resolved": int(store.resolve(args.id, outcome))}
            else:
                result = {"resolved": store.resolve_question(_need(args.question, "--question or --id"), outcome)}
    except (InvalidArgument, json.JSONDecodeError) as exc:
        print(f"agentenvs forecast {args.action}: {exc}")
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


def _need(value: str | None, flag: str) -> str:
    if not value:
        raise InvalidArgument(f"give {flag}")
    return value


def _status(store: object) -> dict[str, object]:
    binary = [p for p in store.resolved() if p.kind == "binary"]
    calibration = reliability([p.forecast for p in binary], [p.outcome for p in binary]) if binary else None
    return {"clock": store.clock(), "counts": store.counts(), "calibration": calibration}

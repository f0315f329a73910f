"""Deterministic generator of the forecast panels: ``python -m agentenvs.tasks.forecast.generate``.

Each split draws its questions from its own worlds (disjoint seeds), so test questions never share a
world with training ones. A question carries its world seed, the tick it opens at (the agent sees the
news up to it), its resolution tick and criteria, and, as privileged fields, the simulator's oracle
forecast and the outcome (applied only when the clock passes the resolution tick). A numeric question also
fixes what its reward is measured on: the quantile levels an answer gives (``quantiles``), ``center`` (the
series' close at the open tick, public) and ``scale`` (docs/forecast.md, "Scores").
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.envs.forecast.world import EVENT_NAMES, HORIZON, SERIES_NAMES, World, build_world, series_forecast
from agentenvs.panels import panel_dir, write_panels
from agentenvs.seeding import rng_for

GENERATOR_VERSION = "1"
SEED = 20261206
WORLDS = {"train": range(0, 12), "dev": range(100, 102), "test": range(200, 204)}
QUESTIONS_PER_WORLD = 24
QUANTILES = ("0.1", "0.5", "0.9")
TYPES = ("event", "match", "threshold", "race", "level")


def _event(world: World, rng: np.random.Generator) -> dict[str, Any]:
    name = str(rng.choice(EVENT_NAMES))
    event = world.events[name]
    tick = event["tick"]
    return {
        "kind": "binary",
        "question": f"Will the {name} scheduled for tick {tick} take place?",
        "criteria": f"Resolves 1 if the news at tick {tick} reports that the {name} took place, else 0.",
        "open_tick": tick - int(rng.integers(1, 25)),
        "resolution_tick": tick,
        "oracle": round(event["p"], 6),
        "outcome": int(event["happens"]),
    }


def _match(world: World, rng: np.random.Generator) -> dict[str, Any]:
    match = world.matches[int(rng.integers(10, len(world.matches)))]
    return {
        "kind": "binary",
        "question": f"Will {match['a']} beat {match['b']} in their match at tick {match['tick']}?",
        "criteria": f"Resolves 1 if {match['a']} wins the match against {match['b']} at tick {match['tick']}, else 0.",
        "open_tick": match["tick"] - int(rng.integers(1, 10)),
        "resolution_tick": match["tick"],
        "oracle": round(match["p_a"], 6),
        "outcome": int(match["winner"] == match["a"]),
    }


def _window(rng: np.random.Generator) -> tuple[int, int]:
    start = int(rng.integers(20, HORIZON - 30))
    return start, start + int(rng.integers(3, 25))


def _threshold(world: World, rng: np.random.Generator) -> dict[str, Any]:
    name = str(rng.choice(SERIES_NAMES))
    start, end = _window(rng)
    threshold = round(world.series[name][start] + float(rng.normal(0, 3)), 1)
    samples = series_forecast(world, name, start, end)
    return {
        "kind": "binary",
        "question": f"Will the {name} close above {threshold} at tick {end}?",
        "criteria": f"Resolves 1 if the {name}'s published close at tick {end} is above {threshold}, else 0.",
        "open_tick": start,
        "resolution_tick": end,
        "oracle": round(float(np.mean(samples > threshold)), 6),
        "outcome": int(world.series[name][end] > threshold),
    }


def _race(world: World, rng: np.random.Generator) -> dict[str, Any]:
    start, end = _window(rng)
    draws = np.stack([series_forecast(world, n, start, end) / world.series[n][start] for n in SERIES_NAMES])
    wins = np.bincount(np.argmax(draws, axis=0), minlength=len(SERIES_NAMES)) / draws.shape[1]
    growth = [world.series[n][end] / world.series[n][start] for n in SERIES_NAMES]
    return {
        "kind": "choice",
        "question": f"Which series rises most (in percent) from tick {start} to tick {end}?",
        "options": list(SERIES_NAMES),
        "criteria": f"Resolves to the series with the largest ratio of its close at tick {end} to tick {start}.",
        "open_tick": start,
        "resolution_tick": end,
        "oracle": {n: round(float(w), 6) for n, w in zip(SERIES_NAMES, wins, strict=True)},
        "outcome": SERIES_NAMES[int(np.argmax(growth))],
    }


def _level(world: World, rng: np.random.Generator) -> dict[str, Any]:
    name = str(rng.choice(SERIES_NAMES))
    start, end = _window(rng)
    samples = series_forecast(world, name, start, end)
    return {
        "kind": "numeric",
        "question": f"What will the {name} close at at tick {end}?",
        "criteria": f"Resolves to the {name}'s published close at tick {end}.",
        "open_tick": start,
        "resolution_tick": end,
        "scale": round(float(np.std(samples)) * 2 + 1.0, 4),
        "center": world.series[name][start],
        "quantiles": list(QUANTILES),
        "oracle": {q: round(float(np.quantile(samples, float(q))), 4) for q in QUANTILES},
        "outcome": world.series[name][end],
    }


MAKERS = {"event": _event, "match": _match, "threshold": _threshold, "race": _race, "level": _level}


def build_panels() -> dict[str, list[dict[str, Any]]]:
    """Every split's questions, world by world; binary questions are three of the five types."""
    out: dict[str, list[dict[str, Any]]] = {}
    for split, seeds in WORLDS.items():
        rows = []
        for seed in seeds:
            world = build_world(seed)
            for index in range(QUESTIONS_PER_WORLD):
                qtype = TYPES[index % len(TYPES)]
                rng = rng_for("forecast-panel", GENERATOR_VERSION, SEED, split, seed, index)
                row = {"task_id": f"{qtype}-w{seed}-{index:02d}", "task_type": qtype, "world_seed": seed}
                rows.append({**row, **MAKERS[qtype](world, rng)})
        out[split] = rows
    return out


def generate(root: Path | None = None) -> Path:
    """Write the panels and manifest under ``root`` (default: the package's ``tasks/``)."""
    extra = {"task_types": list(TYPES), "quantiles": list(QUANTILES), "horizon": HORIZON}
    return write_panels(
        "forecast", build_panels(), generator_version=GENERATOR_VERSION, seed=SEED, root=root, extra=extra
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenvs.tasks.forecast.generate", description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="folder to write <root>/forecast/ into")
    args = parser.parse_args(argv)
    manifest = generate(args.root)
    print(f"wrote {manifest} (panels under {panel_dir('forecast', args.root) / 'panels'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A seeded simulated world with a clock: hidden processes that publish news and data tick by tick.

Three kinds of hidden process (docs/forecast.md, "The world"):

- series: a value that trends, jumps and reverts to a hidden mean; each tick publishes its close;
- contests: entities with hidden strengths play matches (P(a beats b) = sigmoid(s_a - s_b)); results are news;
- events: scheduled events with hidden odds; sources publish a noisy "likely"/"unlikely" rating each tick
  (a rating says "likely" with the event's hidden probability), and the event happens at its tick.

The whole timeline is drawn at construction from ``rng_for("forecast-world", seed)``, so a world is the
same on every machine; the clock only decides what has been published. Privileged truth (strengths,
odds, the series' law) stays inside and gives each question its oracle probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs.seeding import rng_for

HORIZON = 120
"""Ticks in a world's timeline."""
ENTITY_NAMES = ("Aurora", "Basilisk", "Comet", "Dynamo", "Ember", "Falcon", "Granite", "Harbor")
SERIES_NAMES = ("wheat index", "copper price", "river level")
EVENT_NAMES = ("port strike", "merger vote", "launch window", "rate cut", "harvest festival", "bridge opening")


@dataclass(frozen=True)
class NewsItem:
    """One published item: visible from ``tick`` on."""

    item_id: str
    tick: int
    title: str
    body: str


@dataclass
class World:
    """The timeline of one seeded world; ``news(upto)`` is what an agent may read at tick ``upto``."""

    seed: int
    strengths: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    series_law: dict[str, dict[str, float]] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    matches: list[dict[str, Any]] = field(default_factory=list)
    items: list[NewsItem] = field(default_factory=list)

    def news(self, upto: int) -> list[NewsItem]:
        """Items published at or before tick ``upto``."""
        return [item for item in self.items if item.tick <= upto]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def build_world(seed: int) -> World:
    """Draw the world of ``seed``: strengths, series paths, event odds and outcomes, and all the news."""
    rng = rng_for("forecast-world", seed)
    world = World(seed=seed)
    world.strengths = {name: round(float(rng.normal(0.0, 1.0)), 3) for name in ENTITY_NAMES}
    for name in SERIES_NAMES:
        _draw_series(world, name, rng)
    _draw_matches(world, rng)
    for index, name in enumerate(EVENT_NAMES):
        _draw_event(world, name, 30 + 15 * index, rng)
    world.items.sort(key=lambda item: (item.tick, item.item_id))
    return world


def _draw_series(world: World, name: str, rng: np.random.Generator) -> None:
    law = {
        "mean": float(rng.uniform(80, 120)),
        "revert": float(rng.uniform(0.02, 0.1)),
        "trend": float(rng.normal(0.0, 0.15)),
        "noise": float(rng.uniform(0.5, 2.0)),
        "jump_rate": 0.03,
        "jump_size": float(rng.uniform(4, 10)),
    }
    value, path = law["mean"] + float(rng.normal(0, 5)), []
    for tick in range(HORIZON):
        value = step_series(value, tick, law, rng)
        path.append(round(value, 3))
        slug = name.replace(" ", "-")
        world.items.append(
            NewsItem(
                f"{slug}-{tick}",
                tick,
                f"{name} closes at {value:.2f}",
                f"Tick {tick}: the {name} closed at {value:.2f}.",
            )
        )
    world.series[name], world.series_law[name] = path, law


def step_series(value: float, tick: int, law: dict[str, float], rng: np.random.Generator) -> float:
    """One tick of the series: reversion toward a drifting mean, Gaussian noise, and rare jumps."""
    target = law["mean"] + law["trend"] * tick
    value += law["revert"] * (target - value) + law["trend"] + law["noise"] * float(rng.standard_normal())
    if rng.random() < law["jump_rate"]:
        value += law["jump_size"] * (1 if rng.random() < 0.5 else -1)
    return value


def _draw_matches(world: World, rng: np.random.Generator) -> None:
    names = list(ENTITY_NAMES)
    for tick in range(2, HORIZON, 2):
        a, b = (str(x) for x in rng.choice(names, size=2, replace=False))
        p = sigmoid(world.strengths[a] - world.strengths[b])
        winner, loser = (a, b) if rng.random() < p else (b, a)
        world.matches.append({"tick": tick, "a": a, "b": b, "winner": winner, "p_a": p})
        world.items.append(
            NewsItem(
                f"match-{tick}",
                tick,
                f"{winner} beats {loser}",
                f"Tick {tick}: in the match between {a} and {b}, {winner} won.",
            )
        )


def _draw_event(world: World, name: str, tick: int, rng: np.random.Generator) -> None:
    p = float(rng.beta(1.2, 1.2))
    happens = bool(rng.random() < p)
    world.events[name] = {"tick": tick, "p": p, "happens": happens}
    slug = name.replace(" ", "-")
    for t in range(max(0, tick - 30), tick):
        rating = "likely" if rng.random() < p else "unlikely"
        world.items.append(
            NewsItem(
                f"{slug}-rating-{t}",
                t,
                f"{name}: a source rates it {rating}",
                f"Tick {t}: a source says the {name} at tick {tick} is {rating}.",
            )
        )
    verdict = "took place" if happens else "did not take place"
    world.items.append(NewsItem(f"{slug}-result", tick, f"{name} {verdict}", f"Tick {tick}: the {name} {verdict}."))


def series_forecast(world: World, name: str, start: int, end: int, draws: int = 400) -> np.ndarray:
    """Monte Carlo samples of the series at tick ``end`` given its value at ``start`` (the oracle's law)."""
    rng = rng_for("forecast-oracle", world.seed, name, start, end)
    law = world.series_law[name]
    values = np.full(draws, world.series[name][start])
    for tick in range(start + 1, end + 1):
        target = law["mean"] + law["trend"] * tick
        jumps = (rng.random(draws) < law["jump_rate"]) * law["jump_size"] * np.where(rng.random(draws) < 0.5, 1, -1)
        values = (
            values
            + law["revert"] * (target - values)
            + law["trend"]
            + law["noise"] * rng.standard_normal(draws)
            + jumps
        )
    return values

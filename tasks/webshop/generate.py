"""Freeze WebShop's goal panels: ``python -m agentenvs.tasks.webshop.generate``.

The default catalogue is ``catalogue.CATALOGUE`` (10,000 products, seed 0); its sha256 goes into the
manifest, and ``catalogue.default_catalogue`` checks it wherever the panels are played. Goals are the
original's synthetic goals over it (one per option combination, seeded price limits), split by
product: no test product is a train goal's product. ``test_heldout`` holds goals of a category that
no other split has (furniture), for generalisation to an unseen category.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentenvs import panels
from agentenvs.envs.webshop import catalogue
from agentenvs.envs.webshop.catalogue import CATALOGUE, catalogue_digest
from agentenvs.envs.webshop.goals import synthetic_goals
from agentenvs.envs.webshop.products import from_records
from agentenvs.seeding import rng_for

GENERATOR_VERSION = "1"
SEED = 20261207
HELD_OUT_CATEGORY = "furniture"
SIZES = {"train": 3000, "dev": 300, "test": 500, "demo": 5}
HELD_OUT_SIZE = 200


def split_goals(goals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Goals drawn per split from disjoint products; the held-out category only in ``test_heldout``."""
    rng = rng_for("webshop-panels", SEED)
    by_product: dict[str, list[dict[str, Any]]] = {}
    for goal in goals:
        by_product.setdefault(goal["asin"], []).append(goal)
    asins = sorted(by_product)
    rng.shuffle(asins)
    held = [a for a in asins if by_product[a][0]["category"] == HELD_OUT_CATEGORY]
    seen = [a for a in asins if by_product[a][0]["category"] != HELD_OUT_CATEGORY]
    chosen: dict[str, list[dict[str, Any]]] = {}
    for split, size in [*SIZES.items(), ("test_heldout", HELD_OUT_SIZE)]:
        pool = held if split == "test_heldout" else seen
        picked = []
        while len(picked) < size:
            options = by_product[pool.pop()]
            picked.append(options[int(rng.integers(len(options)))])
        chosen[split] = picked
    return chosen


def rows(split: str, goals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"task_id": f"webshop-{split}-{i:04d}", "task_type": goal["category"], "goal": goal}
        for i, goal in enumerate(goals)
    ]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    records = catalogue.generate(CATALOGUE["products"], CATALOGUE["seed"])
    generated = from_records(records["products"], records["attributes"], records["reviews"], "generated")
    splits = {split: rows(split, goals) for split, goals in split_goals(synthetic_goals(generated, SEED)).items()}
    extra = {
        "catalogue": CATALOGUE,
        "catalogue_sha256": catalogue_digest(records),
        "held_out_category": HELD_OUT_CATEGORY,
    }
    print(panels.write_panels("webshop", splits, generator_version=GENERATOR_VERSION, seed=SEED, extra=extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

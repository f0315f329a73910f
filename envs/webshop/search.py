"""WebShop's search engine: Lucene BM25 over the catalogue, as the original, plus its keyword forms.

Each product is indexed as the original's ``convert_product_file_format.py`` writes it: title,
description, first bullet point and ``name: v1, v2, and name: ...`` option text, lower-cased. The
index is built once per catalogue (its key is the sha256 of those documents) into the Lucene cache.

Keywords starting with ``<r>`` (50 random products), ``<a>`` (products with that attribute), ``<c>``
(products of that category) or ``<q>`` (products whose query is the rest) select products as the
original does, without BM25; those forms are not capped at 50, as in the original.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from agentenvs.envs.webshop.products import Catalogue

SEARCH_RETURN_N = 50
"""The most products a BM25 search returns (10 a page)."""


def document(product: dict[str, Any]) -> dict[str, str]:
    """The product as the original indexes it."""
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    first_bullet = product["BulletPoints"][0] if product["BulletPoints"] else ""
    contents = " ".join([product["Title"], product["Description"], first_bullet, options]).lower()
    return {"id": product["asin"], "contents": contents}


def index_key(documents: list[dict[str, str]]) -> str:
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps(doc, sort_keys=True).encode())
    return f"webshop-{digest.hexdigest()[:20]}"


class ProductSearch:
    """Search one catalogue: the original's keyword forms, else BM25 over its Lucene index."""

    def __init__(self, catalogue: Catalogue):
        from agentenvs.retrieval.lucene import LuceneBM25, cached_index

        self.catalogue = catalogue
        documents = [document(p) for p in catalogue.products]
        self.index_dir = cached_index(index_key(documents), lambda: documents)
        self.bm25 = LuceneBM25(self.index_dir)

    def search(self, keywords: list[str], rng: np.random.Generator) -> list[dict[str, Any]]:
        """The products for ``keywords`` (the search text split on spaces), best first."""
        products = self.catalogue.products
        head, rest = (keywords[0], keywords[1:]) if keywords else ("", [])
        if head == "<r>":
            picks = rng.choice(len(products), size=min(SEARCH_RETURN_N, len(products)), replace=False)
            return [products[i] for i in picks]
        if head == "<a>":
            asins = self.catalogue.attribute_to_asins.get(" ".join(rest).strip(), set())
            return [p for p in products if p["asin"] in asins]
        if head == "<c>":
            return [p for p in products if rest and p["category"] == rest[0].strip()]
        if head == "<q>":
            return [p for p in products if p["query"] == " ".join(rest).strip()]
        asins = self.bm25.search(" ".join(keywords), k=SEARCH_RETURN_N)
        return [self.catalogue.by_asin[a] for a in asins if a in self.catalogue.by_asin]

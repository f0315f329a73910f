"""The generated catalogue, the loader it shares with the official data, and the goals made from both."""

from __future__ import annotations

import json
import os
from collections import Counter
from math import prod
from pathlib import Path

import pytest
from webshop_official_sample import OFFICIAL_HUMAN, OFFICIAL_RECORDS, write_official

from agentenvs.envs.webshop import catalogue, goals, products
from agentenvs.envs.webshop.reward import get_reward, normalize_color
from agentenvs.envs.webshop.vocabulary import TYPES


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> products.Catalogue:
    return products.load(catalogue.write(tmp_path_factory.mktemp("catalogue"), 500, 3))


def test_the_catalogue_is_the_same_for_a_seed_and_another_for_another_seed():
    assert catalogue.generate(40, 5) == catalogue.generate(40, 5)
    assert catalogue.generate(40, 5)["products"] != catalogue.generate(40, 6)["products"]


def test_generated_products_have_the_originals_fields_and_five_categories(generated):
    assert Counter(p["category"] for p in generated.products) == {c: 100 for c in catalogue.CATEGORIES}
    for product in generated.products:
        assert len(product["asin"]) == 10 and "›" in product["product_category"]
        assert product["Title"] == product["name"] and product["Attributes"] and product["BulletPoints"]
        assert product["Price"].startswith("$") and 1 <= len(product["pricing"]) <= 2
        assert all(value == value.lower() for values in product["options"].values() for value in values)
    assert len(generated.by_asin) == 500


def test_every_product_has_near_duplicates_of_its_type(generated):
    per_type = Counter(p["query"] for p in generated.products)
    assert min(per_type.values()) >= 5
    assert len({p["Price"] for p in generated.products if p["query"] == "shampoo"}) > 3


def test_no_option_value_trips_the_colour_normalisation_into_another_word():
    for types in TYPES.values():
        for kind in types:
            for value in (v.lower() for values in kind["options"].values() for v in values):
                assert normalize_color(value) in (value, *value.split()), value


def test_the_loader_reads_official_records_as_the_original_does(tmp_path):
    loaded = products.load(write_official(tmp_path))
    assert [p["asin"] for p in loaded.products] == ["B07XJ8C8F5", "B000SHAMPO"]
    shirt, shampoo = loaded.products
    assert shirt["query"] == "men's shirts" and shirt["BulletPoints"] == ["Machine wash"]
    assert shirt["pricing"] == [14.0, 22.0] and shirt["Price"] == "$14.0 to $22.0"
    assert shirt["options"] == {"color": ["black | white"]} and shirt["Attributes"] == [products.DUMMY_ATTR]
    assert 14.0 <= loaded.prices["B07XJ8C8F5"] <= 22.0
    assert loaded.prices == products.load(tmp_path).prices  # seeded by ASIN, not drawn afresh
    assert shampoo["Price"] == "$12.99" and shampoo["MainImage"] is None
    assert loaded.attribute_to_asins["tea tree"] == {"B000SHAMPO"}


def test_human_goals_come_from_the_written_instructions(tmp_path):
    loaded = products.load(write_official(tmp_path))
    human = goals.human_goals(loaded, OFFICIAL_HUMAN, seed=0)
    assert len(human) == 1
    (goal,) = human
    assert goal["instruction_text"].startswith("I want tea tree shampoo, and price lower than")
    assert goal["goal_options"] == ["8 fl oz"] and goal["weight"] == 1
    assert get_reward(loaded.by_asin["B000SHAMPO"], goal, price=12.99, options={"size": "8 fl oz"}) == 1.0


def test_a_users_official_download_loads_where_one_is_present():
    folder = os.environ.get("AGENTENVS_WEBSHOP_DATA")
    if not folder:
        pytest.skip("no official WebShop data: set AGENTENVS_WEBSHOP_DATA to the folder of items_shuffle*.json")
    loaded = products.load(Path(folder), num_products=1000)
    assert len(loaded.products) > 900


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"asin": "B01", "name": "cut off', "not valid JSON \\(line 1"),
        (json.dumps([{"asin": "B01", "name": "x"}]), "record 0 \\(asin 'B01'\\): missing category"),
        (json.dumps([{**OFFICIAL_RECORDS[1], "pricing": "$abc$"}]), "'pricing' '\\$abc\\$' is not a \\$ price"),
        (json.dumps({"not": "a list"}), "must hold a JSON list"),
    ],
)
def test_a_corrupt_or_partial_catalogue_names_the_file_and_the_record(tmp_path, content, message):
    (tmp_path / "items_shuffle.json").write_text(content)
    with pytest.raises(products.CatalogueError, match=message) as caught:
        products.load(tmp_path)
    assert str(tmp_path / "items_shuffle.json") in str(caught.value)


def test_a_folder_without_products_says_what_to_point_at(tmp_path):
    with pytest.raises(products.CatalogueError, match="items_shuffle"):
        products.load(tmp_path)


def test_synthetic_goals_are_one_per_option_combination_with_the_originals_text_and_price_rule(generated):
    made = goals.synthetic_goals(generated, seed=0)
    assert len(made) == sum(prod(len(v) for v in p["options"].values()) for p in generated.products)
    assert made == goals.synthetic_goals(generated, seed=0)
    for goal in made:
        price = generated.prices[goal["asin"]]
        above = [step for step in goals.PRICE_STEPS if step > price][:4]
        assert goal["price_upper"] in above[1:] or (goal["price_upper"] == goals.NO_LIMIT and len(above) < 2)
        options = ", and ".join(f"{k}: {v}" for k, v in goal["goal_options"].items())
        assert f" with {options}, and price lower than {goal['price_upper']:.2f} dollars" in goal["instruction_text"]
        assert 0 < goal["weight"] <= 1
    assert goals.price_limit(985.0, 0, "B0") == (goals.NO_LIMIT, "")


def test_the_goal_product_with_the_goal_options_earns_reward_one_on_every_goal(generated):
    for goal in goals.synthetic_goals(generated, seed=0):
        bought = generated.by_asin[goal["asin"]]
        assert get_reward(bought, goal, price=generated.prices[goal["asin"]], options=goal["goal_options"]) == 1.0

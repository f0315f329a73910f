"""WebShop's reward against the behaviour ``webshop_reward.md`` §2-§6 documents for the original."""

from __future__ import annotations

import random

import pytest

from agentenvs.envs.webshop.reward import (
    COLOR_WORDS,
    InvalidGoal,
    fuzzy_score,
    get_reward,
    normalize_color,
    nouns,
    option_matches,
)

pytest.importorskip("rapidfuzz", reason="the webshop reward needs rapidfuzz: pip install 'agentenvs[webshop]'")

SHAMPOO = {
    "asin": "B0SHAMP001",
    "name": "Tea Tree Oil Shampoo for Dry Scalp, Sulfate Free, 16 Fl Oz",
    "Title": "Tea Tree Oil Shampoo for Dry Scalp, Sulfate Free, 16 Fl Oz",
    "query": "tea tree shampoo",
    "product_category": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
    "Attributes": ["sulfate free", "tea tree"],
    "BulletPoints": ["Cleanses the scalp with tea tree oil", "Safe for color treated hair"],
    "Description": "A gentle, silky shampoo with long-lasting freshness.",
}


def goal(**changes):
    base = {
        "asin": "B0SHAMP001",
        "name": SHAMPOO["name"],
        "query": SHAMPOO["query"],
        "product_category": SHAMPOO["product_category"],
        "attributes": ["sulfate free"],
        "goal_options": {"size": "16 fl oz"},
        "price_upper": 40.0,
    }
    return base | changes


@pytest.mark.parametrize(
    ("first", "second", "score"),
    [
        ("x-large", "large", 100),
        ("small", "x-small", 100),
        ("xx-large", "x-large", 93),
        ("medium", "large", 18),
        ("8", "8.5", 100),
        ("king", "california king", 100),
        ("queen", "king", 22),
        ("12 fl oz", "16 fl oz", 88),
        ("12 pack", "24 pack", 86),
        ("1 pack", "2 pack", 83),
        ("41mm", "45mm", 75),
        (("size", "large"), "x-large", 83),
        ("DUMMY_ATTR", "dummy attr", 50),
        ("", "anything", 0),
    ],
)
def test_the_fuzzy_score_is_the_originals(first, second, score):
    assert fuzzy_score(first, second) == score


def test_the_fuzzy_score_equals_thefuzz_except_where_thefuzz_020_changed_the_underscore():
    thefuzz = pytest.importorskip("thefuzz.fuzz", reason="the comparison needs thefuzz: pip install 'agentenvs[dev]'")
    rng = random.Random(0)
    words = ["navy", "blue", "16", "fl", "oz", "pack", "of", "2", "x-large", "slim-fit", "men's", "caf\u00e9", "12.5"]
    for _ in range(2000):
        first = " ".join(rng.choices(words, k=rng.randint(1, 5)))
        second = " ".join(rng.choices(words, k=rng.randint(1, 5)))
        assert fuzzy_score(first, second) == thefuzz.token_set_ratio(first, second), (first, second)
    assert thefuzz.token_set_ratio("DUMMY_ATTR", "dummy attr") == 100 != fuzzy_score("DUMMY_ATTR", "dummy attr")


@pytest.mark.parametrize(
    ("value", "normalised"),
    [
        ("navy blue", "blue"),
        ("light grey", "grey"),
        ("dark grey", "dark"),
        ("rose gold", "gold"),
        ("black | white", "black"),
        ("washed black", "ash"),
        ("standard", "tan"),
        ("hundred", "red"),
        ("chocolate peanut butter", "chocolate"),
        ("Navy Blue", "Navy Blue"),
        ("16 fl oz", "16 fl oz"),
        (("color", "navy"), "navy"),
        (("color", "navy blue"), ("color", "navy blue")),
    ],
)
def test_colour_normalisation_is_the_originals_substring_and_first_in_list_rule(value, normalised):
    assert normalize_color(value) == normalised


def test_the_colour_list_is_the_originals_102_words_in_order():
    assert len(COLOR_WORDS) == 102 and sorted(COLOR_WORDS) == COLOR_WORDS
    assert (COLOR_WORDS[0], COLOR_WORDS[-1]) == ("alabaster", "yellow")


def test_options_match_as_in_the_original_list_and_dict_forms():
    assert option_matches(["navy blue"], {"color": "navy"}) == 0  # blue vs navy
    assert option_matches({"color": "navy blue"}, {"color": "navy"}) == 1  # "color navy blue" contains navy
    assert option_matches(["light blue"], {"color": "dark blue"}) == 1
    assert option_matches(["gray"], {"color": "grey"}) == 0
    assert option_matches(["large"], {"size": "x-large"}) == 1
    assert option_matches({"size": "large"}, {"size": "x-large"}) == 0  # "('size', 'large')" scores 83


def test_the_exact_purchase_earns_the_full_reward_and_its_components():
    total, info = get_reward(SHAMPOO, goal(), price=12.99, options={"size": "16 fl oz"}, verbose=True)
    assert total == 1.0
    assert info["r_type"] == 1.0 and info["query_match"] and info["category_match"]
    assert info["r_att"] == 1.0 and info["r_option"] == 1.0 and info["r_price"] is True
    assert info["w_att"] == info["w_option"] == info["w_price"] == pytest.approx(1 / 3)


def test_price_options_and_attributes_each_take_one_slot():
    assert get_reward(SHAMPOO, goal(), price=40.0, options={"size": "16 fl oz"}) == 1.0  # the limit is inclusive
    assert get_reward(SHAMPOO, goal(), price=40.01, options={"size": "16 fl oz"}) == pytest.approx(2 / 3)
    assert get_reward(SHAMPOO, goal(), price=12.99, options={"size": "8 fl oz"}) == pytest.approx(2 / 3)
    _, info = get_reward(SHAMPOO, goal(goal_options=[]), price=12.99, options={}, verbose=True)
    assert "r_option" not in info and info["w_att"] == 0.5


def test_attributes_match_as_substrings_without_word_boundaries_and_case_sensitively():
    def r_att(attribute):
        return get_reward(SHAMPOO, goal(attributes=[attribute]), price=1, options={}, verbose=True)[1]["r_att"]

    assert r_att("silk") == 1.0  # in "silky"
    assert r_att("long lasting") == 0.0  # the description says "long-lasting"
    assert r_att("Gentle") == 0.0  # a goal attribute with capitals never matches as a substring
    assert r_att("oil safe") == 1.0  # a phrase across two bullet points
    assert r_att("tea tree oil") == 1.0  # fuzzily: "tea tree" is a token subset


def test_the_type_reward_falls_with_the_title_nouns():
    dryer = {"query": "hair dryer", "product_category": "Electronics › Hair Dryers", "name": "Ionic Hair Dryer"}
    other = SHAMPOO | dryer
    _, info = get_reward(other, goal(), price=1, options={}, verbose=True)
    assert not info["query_match"] and not info["category_match"]
    assert info["title_score"] == 0.0 and info["r_type"] == 0.0
    repeated = "Tweezers Set with Tweezers Case"
    assert nouns(repeated).count("tweezers") == 2
    _, info = get_reward(SHAMPOO | {"name": repeated}, goal(name=repeated), price=1, options={}, verbose=True)
    assert info["title_score"] == pytest.approx(len(set(nouns(repeated))) / len(nouns(repeated)))
    assert info["title_score"] < 1  # a repeated goal noun lowers the score even for the same name


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"attributes": []}, "'attributes'"),
        ({"price_upper": 0}, "'price_upper'"),
        ({"price_upper": -5}, "'price_upper'"),
    ],
)
def test_goals_the_original_crashes_on_raise_an_error_naming_the_field(changes, field):
    with pytest.raises(InvalidGoal, match=field):
        get_reward(SHAMPOO, goal(**changes), price=1, options={})

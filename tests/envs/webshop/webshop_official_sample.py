"""A few records in the official WebShop files' formats, written by hand for the loader's tests."""

from __future__ import annotations

import json
from pathlib import Path

OFFICIAL_RECORDS = [
    {
        "asin": "B07XJ8C8F5",
        "category": "fashion",
        "query": " Men's Shirts ",
        "name": "Classic Oxford Shirt, Long Sleeve",
        "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › Casual Button-Down Shirts",
        "full_description": "A button-down oxford shirt.",
        "small_description": "Machine wash",
        "pricing": "$14.00 - $22.00",
        "customization_options": {"Color": [{"value": "Black/White ", "image": "x.jpg"}], "Size": None},
        "images": ["x.jpg"],
        "brand": "Acme",
    },
    {
        "asin": "B000SHAMPO",
        "category": "beauty",
        "query": "shampoo",
        "name": "Tea Tree Shampoo",
        "product_category": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner",
        "full_description": "",
        "small_description": ["Sulfate free", "For dry scalp"],
        "pricing": "$12.99",
        "customization_options": {"Size": [{"value": "8 fl oz"}, {"value": "16 fl oz"}]},
        "images": [],
    },
    {"asin": "nan", "name": "skipped by the original"},
    {"asin": "B000SHAMPO", "name": "a duplicate, skipped by the original"},
]
OFFICIAL_ATTRIBUTES = {
    "B000SHAMPO": {
        "attributes": ["sulfate free", "tea tree"],
        "instruction": "i need a sulfate free shampoo",
        "instruction_attributes": ["sulfate free"],
    }
}
OFFICIAL_HUMAN = {
    "B000SHAMPO": [
        {
            "instruction": "I want tea tree shampoo.",
            "instruction_attributes": ["tea tree"],
            "instruction_options": ["8 fl oz"],
        },
        {"instruction": "no attributes: skipped", "instruction_attributes": [], "instruction_options": []},
    ]
}


def write_official(folder: Path) -> Path:
    (folder / "items_shuffle_1000.json").write_text(json.dumps(OFFICIAL_RECORDS))
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(OFFICIAL_ATTRIBUTES))
    (folder / "items_human_ins.json").write_text(json.dumps(OFFICIAL_HUMAN))
    return folder

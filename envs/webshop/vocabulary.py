# ruff: noqa: E501  (a data table: one product type per entry reads better than wrapped lists)
"""What the generated catalogue is made of: WebShop's five categories, their product types, attributes,
options and price bands. Each type yields many near-duplicates (same type, other brand, attributes,
options and price), so a search returns look-alikes and the goal's attributes decide."""

from __future__ import annotations

from typing import Any

SIZES_CLOTHES = ["x-small", "small", "medium", "large", "x-large", "xx-large"]
COLORS_CLOTHES = ["black", "navy blue", "heather grey", "white", "burgundy", "olive green", "light blue"]
COLORS_HOME = ["espresso", "white", "natural oak", "walnut", "grey", "black"]

TYPES: dict[str, list[dict[str, Any]]] = {
    "beauty": [
        {"query": "shampoo", "noun": "Shampoo", "path": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
         "attributes": ["sulfate free", "paraben free", "tea tree", "argan oil", "for dry scalp", "color safe", "cruelty free", "natural ingredients"],
         "options": {"size": ["8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz (pack of 2)"]}, "price": (6.0, 38.0)},
        {"query": "face moisturizer", "noun": "Face Moisturizer", "path": "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
         "attributes": ["hyaluronic acid", "fragrance free", "for sensitive skin", "spf 30", "oil free", "vitamin c", "non comedogenic", "long lasting"],
         "options": {"size": ["1.7 fl oz", "2.5 fl oz", "3.4 fl oz"]}, "price": (9.0, 65.0)},
        {"query": "lipstick", "noun": "Lipstick", "path": "Beauty & Personal Care › Makeup › Lips › Lipstick",
         "attributes": ["long lasting", "matte finish", "cruelty free", "vegan", "moisturizing", "waterproof", "highly pigmented"],
         "options": {"color": ["ruby red", "nude", "berry", "coral", "mauve", "plum"]}, "price": (4.0, 28.0)},
        {"query": "hair dryer", "noun": "Hair Dryer", "path": "Beauty & Personal Care › Hair Care › Styling Tools & Appliances › Hair Dryers",
         "attributes": ["ionic", "fast drying", "low noise", "lightweight", "with diffuser", "ceramic", "travel size"],
         "options": {"color": ["black", "rose gold", "white", "pink"]}, "price": (18.0, 120.0)},
        {"query": "nail polish", "noun": "Nail Polish", "path": "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
         "attributes": ["quick dry", "gel effect", "chip resistant", "non toxic", "long lasting", "high shine"],
         "options": {"color": ["cherry red", "pastel pink", "midnight blue", "glitter silver", "classic white"], "size": ["0.5 fl oz", "pack of 3"]},
         "price": (3.0, 19.0)},
    ],
    "electronics": [
        {"query": "wireless earbuds", "noun": "Wireless Earbuds", "path": "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
         "attributes": ["noise cancelling", "bluetooth 5.3", "water resistant", "long battery life", "with charging case", "hands free", "high fidelity"],
         "options": {"color": ["black", "white", "navy blue", "rose gold"]}, "price": (15.0, 180.0)},
        {"query": "usb c charger", "noun": "USB C Charger", "path": "Electronics › Computers & Accessories › Laptop Accessories › Chargers & Adapters",
         "attributes": ["fast charging", "65w", "foldable plug", "dual port", "gan technology", "compact", "overheat protection"],
         "options": {"color": ["white", "black"], "size": ["1 pack", "2 pack"]}, "price": (9.0, 59.0)},
        {"query": "hdmi cable", "noun": "HDMI Cable", "path": "Electronics › Television & Video › Accessories › Cables › HDMI Cables",
         "attributes": ["4k", "high speed", "gold plated", "braided", "ethernet", "8k", "hdr"],
         "options": {"size": ["3 feet", "6 feet", "10 feet", "15 feet"]}, "price": (5.0, 30.0)},
        {"query": "bluetooth speaker", "noun": "Bluetooth Speaker", "path": "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
         "attributes": ["waterproof", "portable", "stereo sound", "deep bass", "long battery life", "built in microphone", "outdoor"],
         "options": {"color": ["black", "blue", "red", "camo"]}, "price": (19.0, 150.0)},
        {"query": "phone case", "noun": "Phone Case", "path": "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
         "attributes": ["shockproof", "slim fit", "clear", "wireless charging compatible", "drop protection", "anti scratch"],
         "options": {"color": ["clear", "black", "purple", "mint green", "pink"], "size": ["iphone 14", "iphone 15", "galaxy s23"]},
         "price": (6.0, 35.0)},
    ],
    "fashion": [
        {"query": "men's t-shirt", "noun": "T-Shirt", "path": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
         "attributes": ["cotton", "machine wash", "short sleeve", "regular fit", "crew neck", "moisture wicking", "classic fit"],
         "options": {"color": COLORS_CLOTHES, "size": SIZES_CLOTHES}, "price": (8.0, 35.0)},
        {"query": "women's running shoes", "noun": "Running Shoes", "path": "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running",
         "attributes": ["non slip", "breathable mesh", "lightweight", "memory foam", "rubber sole", "arch support", "lace up"],
         "options": {"color": ["black", "white", "pink", "grey", "navy blue"], "size": ["6", "7", "7.5", "8", "8.5", "9", "10"]},
         "price": (25.0, 140.0)},
        {"query": "women's leggings", "noun": "Leggings", "path": "Clothing, Shoes & Jewelry › Women › Clothing › Active › Leggings",
         "attributes": ["high waist", "tummy control", "squat proof", "with pockets", "four way stretch", "quick drying"],
         "options": {"color": ["black", "dark grey", "navy blue", "burgundy", "olive green"], "size": SIZES_CLOTHES[:5]},
         "price": (12.0, 55.0)},
        {"query": "men's jeans", "noun": "Jeans", "path": "Clothing, Shoes & Jewelry › Men › Clothing › Jeans",
         "attributes": ["slim fit", "straight leg", "stretch denim", "button closure", "machine wash", "relaxed fit"],
         "options": {"color": ["dark blue", "light blue", "black", "indigo"], "size": ["30w x 30l", "32w x 32l", "34w x 32l", "36w x 34l"]},
         "price": (20.0, 80.0)},
        {"query": "winter beanie", "noun": "Beanie", "path": "Clothing, Shoes & Jewelry › Men › Accessories › Hats & Caps › Skullies & Beanies",
         "attributes": ["warm", "knit", "acrylic", "unisex", "fleece lined", "cuffed", "one size fits most"],
         "options": {"color": ["black", "heather grey", "burgundy", "navy", "mustard yellow"]}, "price": (6.0, 30.0)},
    ],
    "food": [
        {"query": "green tea", "noun": "Green Tea", "path": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green Tea",
         "attributes": ["organic", "caffeine free", "non gmo", "individually wrapped", "gluten free", "antioxidant rich"],
         "options": {"flavor name": ["jasmine", "mint", "lemon", "original"], "size": ["20 count", "40 count", "100 count"]},
         "price": (4.0, 24.0)},
        {"query": "protein bars", "noun": "Protein Bars", "path": "Grocery & Gourmet Food › Snacks & Sweets › Snack Foods › Bars › Protein Bars",
         "attributes": ["high protein", "low sugar", "gluten free", "keto friendly", "plant based", "non gmo", "individually wrapped"],
         "options": {"flavor name": ["chocolate peanut butter", "cookie dough", "vanilla almond", "berry"], "size": ["12 count", "24 count"]},
         "price": (12.0, 45.0)},
        {"query": "olive oil", "noun": "Olive Oil", "path": "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Oils & Vinegars › Olive Oils",
         "attributes": ["extra virgin", "cold pressed", "organic", "product of italy", "non gmo", "first harvest"],
         "options": {"size": ["16.9 fl oz", "25.3 fl oz", "33.8 fl oz", "2 pack"]}, "price": (8.0, 42.0)},
        {"query": "coffee beans", "noun": "Coffee Beans", "path": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Whole Coffee Beans",
         "attributes": ["whole bean", "medium roast", "dark roast", "fair trade", "arabica", "low acid", "single origin"],
         "options": {"size": ["12 ounce", "2 pound", "5 pound"]}, "price": (9.0, 60.0)},
        {"query": "gummy candy", "noun": "Gummy Candy", "path": "Grocery & Gourmet Food › Snacks & Sweets › Candy & Chocolate › Gummy Candy",
         "attributes": ["fat free", "gelatin free", "vegan", "resealable bag", "natural flavors", "gluten free"],
         "options": {"flavor name": ["sour mix", "fruit mix", "peach rings", "cherry"], "size": ["1 pound", "2 pound", "pack of 6"]},
         "price": (5.0, 28.0)},
    ],
    "furniture": [
        {"query": "office chair", "noun": "Office Chair", "path": "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Desk Chairs",
         "attributes": ["ergonomic", "lumbar support", "adjustable height", "mesh back", "swivel", "with armrests", "easy assembly"],
         "options": {"color": ["black", "grey", "white", "blue"]}, "price": (60.0, 320.0)},
        {"query": "bookshelf", "noun": "Bookshelf", "path": "Home & Kitchen › Furniture › Living Room Furniture › Bookcases",
         "attributes": ["5 tier", "industrial style", "wood frame", "metal frame", "easy assembly", "space saving", "open shelf"],
         "options": {"color": COLORS_HOME}, "price": (35.0, 210.0)},
        {"query": "coffee table", "noun": "Coffee Table", "path": "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
         "attributes": ["lift top", "with storage", "mid century", "solid wood", "tempered glass", "round", "easy assembly"],
         "options": {"color": COLORS_HOME[:5]}, "price": (55.0, 380.0)},
        {"query": "bed frame", "noun": "Bed Frame", "path": "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Beds",
         "attributes": ["metal platform", "no box spring needed", "under bed storage", "noise free", "upholstered", "with headboard"],
         "options": {"color": ["black", "grey", "white", "beige"], "size": ["twin", "full", "queen", "king"]}, "price": (90.0, 560.0)},
        {"query": "bar stools", "noun": "Bar Stools", "path": "Home & Kitchen › Furniture › Game & Recreation Room Furniture › Home Bar Furniture › Barstools",
         "attributes": ["set of 2", "counter height", "swivel", "faux leather", "with back", "adjustable", "footrest"],
         "options": {"color": ["black", "brown", "grey", "white"]}, "price": (45.0, 260.0)},
    ],
}  # fmt: skip
"""Each category's product types: the query a shopper types, the noun in names, the ``›`` category
path, attribute phrases (the goals' attributes), option values by option name and a price band."""

BRANDS = [
    "Acme", "Brightline", "Northwind", "Everpure", "Solace", "Kindred", "Lumen", "Pinecrest", "Vireo", "Halcyon",
    "Orbit", "Maple & Co", "Trueform", "Zephyr", "Cobalt", "Meadowbrook", "Nimbus", "Redwood", "Sterling", "Tidal",
]  # fmt: skip

DESCRIPTORS = ["Premium", "Classic", "Essential", "Pro", "Ultra", "Everyday", "Signature", "Deluxe"]

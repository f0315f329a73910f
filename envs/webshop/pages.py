"""WebShop's pages as the original's text environment shows them (``webshop_reward.md`` §7).

A :class:`Browser` holds one session (the page, the search keywords and results page, the open
product, the options clicked) and turns ``search[...]`` / ``click[...]`` into page changes. Each page
is a list of text nodes with their kind; ``text`` joins them with `` [SEP] `` as the original does,
``text_rich`` writes one per line with ``[button] X [button_]`` marks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs.envs.webshop.search import ProductSearch

PRODUCT_WINDOW = 10
BUTTONS = ("Back to Search", "< Prev", "Next >", "Description", "Features", "Reviews", "Attributes", "Buy Now")
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
ACTION = re.compile(r"(.+)\[(.+)\]", re.DOTALL)


@dataclass
class Node:
    """One visible text node: ``kind`` is text, button, option (with its option name) or product."""

    text: str
    kind: str = "text"
    option: str | None = None


@dataclass
class Browser:
    """One shopping session over a catalogue's search engine."""

    engine: ProductSearch
    instruction: str
    rng: np.random.Generator
    show_attrs: bool = False
    page: str = "search"
    keywords: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    page_number: int = 1
    asin: str | None = None
    sub_page: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    clicked: list[str] = field(default_factory=list)

    @property
    def product(self) -> dict[str, Any] | None:
        return self.engine.catalogue.by_asin.get(self.asin) if self.asin else None

    def nodes(self) -> list[Node]:
        """The current page's text nodes, in page order."""
        if self.page == "search":
            return [Node("WebShop"), Node("Instruction:"), Node(self.instruction), Node("Search", "button")]
        head = [Node("Instruction:"), Node(self.instruction), Node("Back to Search", "button")]
        if self.page == "results":
            return head + self._results_nodes()
        head.append(Node("< Prev", "button"))
        product = self.product or {}
        if self.page == "item":
            return head + self._item_nodes(product)
        return head + self._sub_page_nodes(product)

    def _results_nodes(self) -> list[Node]:
        shown = self.results[(self.page_number - 1) * PRODUCT_WINDOW : self.page_number * PRODUCT_WINDOW]
        nodes = [Node(f"Page {self.page_number} (Total results: {len(self.results)})")]
        if self.page_number > 1:
            nodes.append(Node("< Prev", "button"))
        nodes.append(Node("Next >", "button"))
        for item in shown:
            nodes += [Node(item["asin"], "product"), Node(item["Title"]), Node(item["Price"])]
        return nodes

    def _item_nodes(self, product: dict[str, Any]) -> list[Node]:
        nodes = []
        for name, values in product["options"].items():
            nodes.append(Node(name))
            nodes += [Node(value, "option", name) for value in values]
        nodes += [Node(product["Title"]), Node(f"Price: {product['Price']}"), Node(f"Rating: {product['Rating']}")]
        buttons = ["Description", "Features", "Reviews"] + (["Attributes"] if self.show_attrs else []) + ["Buy Now"]
        return nodes + [Node(button, "button") for button in buttons]

    def _sub_page_nodes(self, product: dict[str, Any]) -> list[Node]:
        if self.sub_page == "Description":
            texts = [product["Description"]]
        elif self.sub_page == "Features":
            texts = list(product["BulletPoints"])
        elif self.sub_page == "Reviews":
            texts = [part for r in product["Reviews"] for part in (f'"{r["title"]}"', str(r["score"]), r["body"])]
        else:
            texts = [*product["Attributes"], product["category"], product["query"], product["product_category"]]
        return [Node(text) for text in texts if str(text).strip()]

    def clickables(self) -> dict[str, Node]:
        """Lower-cased clickable text to its node (a later node of the same text wins, as in the original)."""
        found = {}
        for node in self.nodes():
            if node.kind in ("button", "option", "product") and node.text != "Search":
                found[node.text.lower()] = node
        return found

    def act(self, action: str) -> bool:
        """Carry out ``search[...]`` or ``click[...]``; False (and nothing changes) when it is not valid."""
        match = ACTION.fullmatch(action.strip())
        if match is None:
            return False
        name, argument = match.group(1).strip().lower(), match.group(2).lower()
        if name == "search" and argument.strip():
            self.page, self.keywords, self.page_number = "results", argument.split(" "), 1
            self.results = self.engine.search(self.keywords, self.rng)
            self.asin, self.sub_page, self.options, self.clicked = None, None, {}, []
            return True
        clickable = self.clickables().get(argument) if name == "click" else None
        if clickable is None or self.page == "done":
            return False
        self._click(clickable)
        return True

    def _click(self, node: Node) -> None:
        text = node.text
        if node.kind == "product":
            self.page, self.asin, self.sub_page = "item", text, None
            self.visited.append(text)
        elif node.kind == "option":
            self.options[node.option] = text
            self.clicked.insert(0, text)
        elif text == "Back to Search":
            self.page, self.keywords, self.results, self.page_number = "search", [], [], 1
            self.asin, self.sub_page, self.options, self.clicked = None, None, {}, []
        elif text == "Next >":
            self.page_number += 1
        elif text == "< Prev":
            if self.page == "results":
                self.page_number -= 1
            elif self.page == "item":
                self.page, self.asin = "results", None
            else:
                self.page, self.sub_page = "item", None
        elif text in SUB_PAGES:
            self.page, self.sub_page = "sub", text
        elif text == "Buy Now":
            self.page = "done"

    def text(self) -> str:
        return " [SEP] ".join(node.text for node in self.nodes())

    def text_rich(self) -> str:
        """One node a line; buttons as ``[button] X [button_]``, clicked options marked, newest click first."""
        lines = [f"You have clicked {text}." for text in self.clicked if self.page == "item"]
        for node in self.nodes():
            if node.kind == "button":
                lines.append(f"[button] {node.text} [button_]")
            elif node.kind == "option":
                mark = "clicked button" if self.options.get(node.option) == node.text else "button"
                lines.append(f"  [{mark}] {node.text} [{mark}_]")
            elif node.kind == "product":
                mark = "clicked button" if node.text in self.visited else "button"
                lines += ["", f"[{mark}] {node.text} [{mark}_]"]
            else:
                lines.append(node.text)
        return "\n".join(lines)

    def done_text(self, reward: float) -> str:
        """The page after Buy Now (its CSS-hidden purchase block shows in text, as in the original)."""
        purchase = json.dumps({"asin": self.asin, "options": self.options})
        parts = ["Thank you for shopping with us!", "Your code:", "None", purchase, "Your score (min 0.0, max 1.0)"]
        return " [SEP] ".join([*parts, str(reward)])

    def state_key(self) -> str:
        """Everything that decides this page and the pages a click reaches: equal keys, equal session
        states (the anchor). The results, not the keywords: a ``<r>`` search draws new ones each time,
        and two searches with the same results lead to the same pages."""
        results = [item["asin"] for item in self.results]
        key = [self.page, results, self.page_number, self.asin, self.sub_page, sorted(self.options.items())]
        return json.dumps(key)

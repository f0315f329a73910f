"""``WebShopEnv``: the original WebShop task (search, pick, buy) on the generated or the official catalogue.

A task is a goal (the original's dict: instruction, attributes, options, price limit, the product it
was made from). The agent searches with ``search[...]`` and clicks with ``click[...]``; the reward is
0 until Buy Now, then the original's ``get_reward`` of the product bought, its options and its price.
``agentenvs.make("webshop", data_dir=FOLDER)`` plays a download of the official data instead of the
generated catalogue: its human goals (or, without ``items_human_ins.json``, its synthetic ones),
shuffled with seed 233 and split as the original's baselines split them (test 0-499, dev 500-1499,
train the rest).
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs.core import TextEnv, Transition
from agentenvs.envs.webshop import SPEC
from agentenvs.envs.webshop.expert import expert_plan
from agentenvs.envs.webshop.pages import Browser
from agentenvs.envs.webshop.reward import get_reward
from agentenvs.envs.webshop.search import ProductSearch
from agentenvs.errors import InvalidArgument
from agentenvs.info import text_hash

OBSERVATION_MODES = ("text", "text_rich")
OFFICIAL_SPLITS = {"test": (0, 500), "dev": (500, 1500), "train": (1500, None)}

INSTRUCTIONS = """You are shopping on WebShop. Find and buy the product the instruction describes,
with the options it asks for, within its price.
Actions: search[keywords] on the search page; click[X] where X is a button, a product ID or an option
value shown on the page (e.g. click[b0100000ab], click[16 fl oz], click[< prev], click[next >],
click[description], click[back to search], click[buy now]).
The page's clickable actions are listed. Buying ends the episode; you have at most {max_turns} turns.
Write your reasoning if you like, then the action inside <action>...</action>,
e.g. <action>search[tea tree shampoo]</action>."""


@lru_cache(maxsize=4)
def search_engine(data_dir: str | None, num_products: int | None) -> ProductSearch:
    """One catalogue and its index per process, shared by every environment on it."""
    from agentenvs.envs.webshop.catalogue import default_catalogue

    if data_dir is None:
        return ProductSearch(default_catalogue())
    from agentenvs.envs.webshop.products import load

    return ProductSearch(load(Path(data_dir), num_products))


@lru_cache(maxsize=4)
def official_tasks(data_dir: str, num_products: int | None, human: bool) -> tuple[dict[str, Any], ...]:
    """The official data's goals as tasks, in the original's shuffled order."""
    from agentenvs.envs.webshop.goals import human_goals, synthetic_goals
    from agentenvs.envs.webshop.products import find, read_json

    catalogue = search_engine(data_dir, num_products).catalogue
    instructions = find(Path(data_dir), "human") if human else None
    made = human_goals(catalogue, read_json(instructions), 0) if instructions else synthetic_goals(catalogue, 0)
    random.Random(233).shuffle(made)
    return tuple(
        {"task_id": f"webshop-official-{i:05d}", "task_type": goal["category"], "index": i, "goal": goal}
        for i, goal in enumerate(made)
    )


class WebShopEnv(TextEnv):
    """WebShop: ``score`` is 0 until Buy Now, then the original's reward; ``success`` is reward 1.0."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    default_split: ClassVar[str] = "demo"
    max_action_chars: ClassVar[int] = 500
    action_format: ClassVar[str] = "search[keywords] or click[X] inside <action>...</action>"
    has_admissible_actions: ClassVar[bool] = True
    has_privileged: ClassVar[bool] = True

    def __init__(
        self,
        *,
        data_dir: str | Path | None = None,
        num_products: int | None = None,
        observation_mode: str = "text",
        show_attrs: bool = False,
        human_goals: bool = True,
        max_turns: int | None = None,
        privileged: bool = False,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, privileged=privileged, render_mode=render_mode)
        if observation_mode not in OBSERVATION_MODES:
            raise InvalidArgument(f"observation_mode {observation_mode!r}: choose one of {OBSERVATION_MODES}")
        self.data_dir = None if data_dir is None else str(Path(data_dir).resolve())
        self.num_products, self.observation_mode, self.show_attrs = num_products, observation_mode, show_attrs
        self.human_goals = human_goals
        if self.data_dir is not None:
            self.default_split = "test"
        self.instructions = INSTRUCTIONS.replace("{max_turns}", str(self.max_turns))
        self._browser: Browser | None = None
        self._invalid = 0
        self._metrics: dict[str, float] = {}
        self._reward = 0.0

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        if self.data_dir is None:
            return super().tasks(split)
        start, stop = OFFICIAL_SPLITS[split]
        return official_tasks(self.data_dir, self.num_products, self.human_goals)[start:stop]

    def splits(self) -> dict[str, int]:
        if self.data_dir is None:
            return super().splits()
        return {split: len(self.tasks(split)) for split in OFFICIAL_SPLITS}

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        engine = search_engine(self.data_dir, self.num_products)
        self._browser = Browser(engine, task["goal"]["instruction_text"], rng, show_attrs=self.show_attrs)
        self._invalid, self._metrics, self._reward = 0, {}, 0.0
        return self._observe(None)

    def _step(self, action: str) -> Transition:
        browser = self._browser
        valid = browser.act(action)
        if browser.page != "done":
            observation, info = self._observe(valid)
            return Transition(observation, 0.0, info=info)
        goal = self._task["goal"]
        price = browser.engine.catalogue.prices[browser.asin]
        self._reward, parts = get_reward(browser.product, goal, price=price, options=browser.options, verbose=True)
        self._metrics = {key: float(value) for key, value in parts.items() if key.startswith("r_")}
        _, info = self._observe(True)
        info["success"] = self._reward == 1.0
        return Transition(browser.done_text(self._reward), self._reward, terminated=True, info=info)

    def _observe(self, action_valid: bool | None) -> tuple[str, dict[str, Any]]:
        browser = self._browser
        if action_valid is False:
            self._invalid += 1
        admissible = [f"click[{text}]" for text in browser.clickables()]
        if browser.page == "search":  # any search[...] is accepted; the instruction is the obvious one
            admissible.insert(0, f"search[{self._task['goal']['instruction_text'].lower()}]")
        info: dict[str, Any] = {
            "admissible_actions": admissible if browser.page != "done" else [],
            "anchor": text_hash(self._task["task_id"] + browser.state_key()),
            "score": self._reward,
            "metrics": {"invalid_actions": float(self._invalid), **self._metrics},
        }
        if action_valid is not None:
            info["action_valid"] = action_valid
        if self.privileged and browser.page != "done":
            plan = expert_plan(browser, self._task["goal"])
            info["privileged"] = {"expert_plan": plan, "expert_action": plan[0]}
        observation = browser.text() if self.observation_mode == "text" else browser.text_rich()
        return observation.replace("›", ">").encode("ascii", "replace").decode("ascii"), info

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """An item with its options clicked, reached straight from a search or after another search
        and Back to Search, its options clicked in the other order (for the conformance suite's
        anchor check); None where the two searches find the same products."""
        query = self._task["goal"]["instruction_text"].lower()
        other = query.split()[-1] if len(query.split()) > 1 else "product"
        scratch = Browser(self._browser.engine, self._browser.instruction, np.random.default_rng(0))
        scratch.act(f"search[{other}]")
        elsewhere = scratch.results
        scratch.act(f"search[{query}]")
        if not scratch.results or scratch.results == elsewhere:
            return None
        asin = scratch.results[0]["asin"]
        scratch.act(f"click[{asin}]")
        clickables = scratch.clickables()
        options = [
            f"click[{values[0]}]"
            for name, values in scratch.product["options"].items()
            if values and clickables.get(values[0].lower()) is not None and clickables[values[0].lower()].option == name
        ][:2]
        straight = [f"search[{query}]", f"click[{asin}]", *options]
        return straight, [f"search[{other}]", "click[back to search]", *straight[:2], *reversed(options)]

    def _describe(self) -> dict[str, Any]:
        catalogue = search_engine(self.data_dir, self.num_products).catalogue
        return {
            "catalogue": self.data_dir or "generated (tasks/webshop/manifest.json)",
            "products": len(catalogue.products),
            "observation_mode": self.observation_mode,
        }

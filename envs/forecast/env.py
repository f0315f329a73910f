"""The forecast environment: read a question about the simulated future, search the news, submit a forecast.

In ``pending`` mode (the default) the episode ends with reward 0, ``reward_pending=True`` and a
``resolution_id``; with a prediction store (``store=`` or ``$AGENTENVS_FORECAST_STORE``) the forecast is
written there, and ``agentenvs forecast advance``/``resolve`` backfill its scores later. In ``resolved``
mode the question's known outcome scores the forecast at once (fast training). See docs/forecast.md.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentenvs import panels
from agentenvs.actions import ExtractedAction, extract_tagged_action, strip_span
from agentenvs.core import TextEnv, Transition, ascii_safe
from agentenvs.envs.forecast import SPEC
from agentenvs.envs.forecast.answers import ANSWER_TAG, TOOL, find_answer, parse_answer
from agentenvs.envs.forecast.questions import load_questions
from agentenvs.envs.forecast.world import NewsItem, World, build_world
from agentenvs.errors import InvalidArgument
from agentenvs.forecast_scores import CHOICE_TOLERANCE, level_text, quantile_levels, score_forecast
from agentenvs.info import text_hash
from agentenvs.predictions import PredictionStore

MODES = ("pending", "resolved")
SEARCH_HITS = 8
STORE_ENV = "AGENTENVS_FORECAST_STORE"


@lru_cache(maxsize=64)
def world_of(seed: int) -> World:
    """Worlds are rebuilt from their seed (~20 ms) and shared by the episodes of one process."""
    return build_world(seed)


def answer_text(kind: str, forecast: Any, options: list[str] | None = None) -> str:
    """``<answer>...</answer>`` for a forecast (a choice forecast as a list in option order)."""
    if kind == "choice":
        forecast = [float(forecast[o]) for o in options]
    return f"<answer>{json.dumps(forecast)}</answer>"


@lru_cache(maxsize=1)
def base_rates(train: tuple[dict[str, Any], ...] | None = None) -> dict[str, Any]:
    """Climatology of a train panel (default: the frozen one): the frequency of yes, how often each option
    won, and the numeric outcomes (whose quantiles at a question's levels are its climatology)."""
    train = tuple(panels.load_panel(SPEC.name, "train")) if train is None else train
    yes = [t["outcome"] for t in train if t["kind"] == "binary"]
    won = Counter(t["outcome"] for t in train if t["kind"] == "choice")
    return {
        "binary": round(float(np.mean(yes)), 4) if yes else 0.5,
        "numeric": tuple(float(t["outcome"]) for t in train if t["kind"] == "numeric"),
        "choice": dict(won),
    }


def answer_rules(task: dict[str, Any]) -> str:
    """The line of the first observation that says what answer the question takes and how it is scored."""
    if task["kind"] == "binary":
        return "Answer with the probability (in [0, 1]) that it resolves 1; scored by the Brier score."
    if task["kind"] == "choice":
        return (
            f"Answer with one probability (in [0, 1]) per option, summing to 1 (within {CHOICE_TOLERANCE}; they are "
            "rescaled to sum to 1); scored by the Brier score."
        )
    levels = [level_text(level) for level in quantile_levels(task)]
    example = ", ".join(f'"{level}": ...' for level in levels)
    return (
        f"Answer with your quantiles at exactly the levels {', '.join(levels)} (<answer>{{{example}}}</answer>, or "
        "a list of the values in that order), not decreasing; scored by the quantile (pinball) loss at these "
        "levels. Other levels are not accepted."
    )


class ForecastEnv(TextEnv):
    """One forecasting question per episode; ``search[...]``/``read[...]`` then ``<answer>...</answer>``."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    action_format: ClassVar[str] = "search[words], read[item id], or <answer>forecast</answer>"
    instructions: ClassVar[str] = (
        "You are a forecaster. Answer the question about the future with calibrated probabilities. Before "
        "answering you may look up the news published so far: search[words] lists matching headlines, "
        "read[id] shows one item. Put one action inside <action></action>, or give your forecast inside "
        "<answer></answer>: a probability for a yes/no question (<answer>0.7</answer>), a probability per option "
        'for a multiple choice question (<answer>{"A": 0.2, "B": 0.8}</answer>), and your quantiles at the '
        "question's levels for a number (<answer>[95.0, 101.5, 108.0]</answer> for 10%, 50% and 90%). The last "
        "<answer> of a response counts; an answer that is not accepted can be given again."
    )
    has_privileged: ClassVar[bool] = True
    has_delayed_reward: ClassVar[bool] = True

    def __init__(
        self,
        *,
        mode: str = "pending",
        store: str | Path | None = None,
        questions: str | Path | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if mode not in MODES:
            raise InvalidArgument(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        store = store if store is not None else os.environ.get(STORE_ENV)
        self.store = PredictionStore(store) if store else None
        self._questions = load_questions(questions) if questions is not None else None

    # ------------------------------------------------------------------ tasks

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        """The frozen panels, or a user's JSONL question set (split ``custom``) when ``questions=`` was given."""
        if self._questions is None:
            return super().tasks(split)
        if split != "custom":
            raise InvalidArgument(f"a question file gives one split, 'custom'; got {split!r}")
        return self._questions

    def splits(self) -> dict[str, int]:
        return super().splits() if self._questions is None else {"custom": len(self._questions)}

    # ------------------------------------------------------------------ hooks

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        self._items = self._visible_news(task)
        self._looked: set[str] = set()
        self._forecast: Any = None
        lines = [self.instructions, "", f"Question: {task['question']}", f"Resolution: {task['criteria']}"]
        if task.get("options"):
            lines.append("Options: " + ", ".join(task["options"]))
        lines.append(answer_rules(task))
        if "open_tick" in task:
            lines.append(
                f"It is now tick {task['open_tick']}; the question resolves at tick {task['resolution_tick']}."
            )
        lines.append(f"{len(self._items)} news items are available.")
        return "\n".join(lines), self._info(valid=None)

    def _visible_news(self, task: dict[str, Any]) -> dict[str, NewsItem]:
        if "world_seed" in task:
            items = world_of(int(task["world_seed"])).news(int(task["open_tick"]))
        else:
            items = [NewsItem(f"bg-{i}", 0, text[:80], text) for i, text in enumerate(task.get("background", []))]
        return {item.item_id: item for item in items}

    def _step(self, action: str) -> Transition:
        answer = find_answer(action)
        if answer is not None:
            return self._submit(answer)
        tool = TOOL.match(action)
        if tool is None:
            text = f"'{ascii_safe(action)}' is not an action: use search[words], read[id] or <answer>...</answer>."
            return Transition(text, info=self._info(valid=False))
        verb, argument = tool.group(1).lower(), tool.group(2).strip()
        self._looked.add(f"{verb}:{argument.lower()}")
        text = self._search(argument) if verb == "search" else self._read(argument)
        return Transition(text, info=self._info(valid=True))

    def _search(self, query: str) -> str:
        words = query.lower().split()
        hits = [i for i in self._items.values() if all(w in i.title.lower() or w in i.body.lower() for w in words)]
        if not hits:
            return f"No news matches '{ascii_safe(query)}'."
        shown = sorted(hits, key=lambda i: (-i.tick, i.item_id))[:SEARCH_HITS]
        head = f"{len(hits)} items match '{ascii_safe(query)}'; the {len(shown)} most recent:"
        return "\n".join([head, *(f"[{i.item_id}] tick {i.tick}: {i.title}" for i in shown)])

    def _read(self, item_id: str) -> str:
        item = self._items.get(item_id)
        if item is None:
            return f"No item '{ascii_safe(item_id)}'; read[...] takes an id that search[...] listed."
        return item.body

    def _submit(self, answer: str) -> Transition:
        task = self.task
        try:
            forecast = parse_answer(answer, task["kind"], task)
        except InvalidArgument as exc:
            return Transition(f"Your answer was not accepted: {exc}. Answer again.", info=self._info(valid=False))
        self._forecast = forecast
        rid = self.resolution_id(forecast)
        info = self._info(valid=True)
        info["resolution_id"] = rid
        if self.mode == "resolved" and task.get("outcome") is not None:
            scores = score_forecast(task["kind"], forecast, task["outcome"], task)
            info["success"] = bool(scores.pop("success"))
            info["score"], info["metrics"] = scores["reward"], {**info["metrics"], **scores}
            if task["kind"] == "binary":  # the pair behind the leaderboard's reliability diagram
                info["metrics"].update({"forecast_p": float(forecast), "outcome_y": int(task["outcome"])})
            return Transition("Your forecast was scored against the known outcome.", scores["reward"], True, info)
        if self.store is not None:
            self.store.add(rid, task["task_id"], task["kind"], forecast, self._payload())
        info["reward_pending"], info["success"] = True, False  # a success is only known once it resolves
        return Transition("Your forecast is recorded; it is scored when the question resolves.", 0.0, True, info)

    def _payload(self) -> dict[str, Any]:
        """What the resolver needs to score the stored forecast as this episode would have (its rules) and
        to know when it is due."""
        task = self.task
        keys = ("options", "scale", "center", "open_tick", "resolution_tick", "world_seed")
        payload = {key: task[key] for key in keys if key in task}
        if task["kind"] == "numeric":
            payload["quantiles"] = [level_text(level) for level in quantile_levels(task)]
        return {**payload, "split": self._split}

    def resolution_id(self, forecast: Any) -> str:
        """Unique per (task, seed, actions, forecast): a replayed episode gives the same id (idempotent writes)."""
        return f"{self.task['task_id']}:{text_hash(repr((self._seed, self._actions, forecast)))[:16]}"

    def extract_action(self, response: str) -> ExtractedAction | None:
        """The last ``<answer>...</answer>`` (kept with its tags), else the last ``<action>...</action>``."""
        matches = list(ANSWER_TAG.finditer(response))
        if matches:
            return strip_span(response, matches[-1].start(), matches[-1].end())
        return extract_tagged_action(response)

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Two searches in either order reach one state (what was looked up, not in which order)."""
        if self.max_turns - self.turn < 3:
            return None
        return ["search[news]", "search[tick]"], ["search[tick]", "search[news]"]

    def _describe(self) -> dict[str, Any]:
        return {"modes": list(MODES), "kinds": ["binary", "choice", "numeric"], "delayed_reward": True}

    def _info(self, *, valid: bool | None) -> dict[str, Any]:
        task = self.task
        info: dict[str, Any] = {
            "score": 0.0,
            "anchor": text_hash(f"{task['task_id']}\n{sorted(self._looked)}\n{self._forecast is not None}"),
            "metrics": {"lookups": len(self._looked), "news_items": len(self._items)},
        }
        if valid is not None:
            info["action_valid"] = valid
        if self.privileged:
            info["privileged"] = {"oracle": task.get("oracle"), "gold_answer": task.get("outcome")}
            if task.get("oracle") is not None:
                info["privileged"]["expert_action"] = answer_text(task["kind"], task["oracle"], task.get("options"))
            info["privileged"]["baseline_actions"] = self._baselines(task)
        return info

    def _baselines(self, task: dict[str, Any]) -> dict[str, str]:
        """The answers of the reference forecasters: ``base_rate`` (the train panel's frequencies) and
        ``half`` (0.5, uniform over options; numeric questions have no such forecast and get the base rate)."""
        kind, options = task["kind"], task.get("options")
        rates = base_rates() if self._questions is None else base_rates.__wrapped__(())
        if kind == "binary":
            return {"base_rate": answer_text(kind, rates["binary"]), "half": answer_text(kind, 0.5)}
        if kind == "choice":  # how often each option won in train, smoothed by one win each
            counts = {o: rates["choice"].get(o, 0) + 1 for o in options}
            freq = {o: c / sum(counts.values()) for o, c in counts.items()}
            uniform = {o: 1.0 / len(options) for o in options}
            return {"base_rate": answer_text(kind, freq, options), "half": answer_text(kind, uniform, options)}
        levels = quantile_levels(task)
        values = np.quantile(rates["numeric"], levels).round(3).tolist() if rates["numeric"] else [0.0] * len(levels)
        climate = answer_text(kind, dict(zip(map(level_text, levels), values, strict=True)))
        return {"base_rate": climate, "half": climate}

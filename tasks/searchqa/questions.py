"""Questions over the world: single-hop, bridge (2 and 3 hops) and comparison, with their gold fields.

A question is a chain of hops ``(subject, relation)``: each hop's answer is the next hop's subject, and
the last hop's answer is the question's (for a comparison, two independent hops and a comparator).
Each question carries its gold answers, the ids of the passages that support it, and its golden
sub-queries (one per hop: the subject's title and the relation's words), all privileged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from agentenvs.envs.searchqa.reading import sub_query
from agentenvs.tasks.searchqa.world import Entity, World


def refer(entity: Entity) -> str:
    """How a question names an entity: ``the painter Ana Bell`` for the title ``Ana Bell (painter)``."""
    if entity.title == entity.name:
        return entity.name
    qualifier = entity.title[len(entity.name) + 2 : -1]
    return f"the {qualifier} {entity.name}"


Template = tuple[str, str, tuple[str, ...], str]
"""(name, kind of the first subject, relations, question text with ``{x}`` for the subject)."""

SINGLE: list[Template] = [
    ("person-born", "person", ("born",), "In which year was {x} born?"),
    ("person-birthplace", "person", ("birthplace",), "In which city was {x} born?"),
    ("city-country", "city", ("country",), "In which country is the city of {x}?"),
    ("city-population", "city", ("population",), "What is the population of {x}?"),
    ("country-capital", "country", ("capital",), "What is the capital of {x}?"),
    ("org-founder", "organisation", ("founder",), "Who founded {x}?"),
    ("org-headquarters", "organisation", ("headquarters",), "In which city is {x} headquartered?"),
    ("work-author", "work", ("author",), "Who is the creator of {x}?"),
    ("work-year", "work", ("year",), "In which year was {x} completed?"),
]
BRIDGE: list[Template] = [
    ("person-birth-country", "person", ("birthplace", "country"), "In which country was {x} born?"),
    ("org-founder-born", "organisation", ("founder", "born"), "In which year was the founder of {x} born?"),
    ("org-hq-country", "organisation", ("headquarters", "country"), "In which country is {x} headquartered?"),
    ("work-author-birthplace", "work", ("author", "birthplace"), "In which city was the creator of {x} born?"),
    ("work-author-country", "work", ("author", "birthplace", "country"),
     "In which country was the creator of {x} born?"),
    ("org-founder-birth-population", "organisation", ("founder", "birthplace", "population"),
     "What is the population of the city where the founder of {x} was born?"),
]  # fmt: skip
COMPARISON: list[tuple[str, str, str, str, str]] = [
    ("compare-born", "person", "born", "min", "Who was born first, {a} or {b}?"),
    ("compare-population", "city", "population", "max", "Which city has the larger population, {a} or {b}?"),
    ("compare-founded", "organisation", "founded", "min", "Which was founded earlier, {a} or {b}?"),
]


class Asker:
    """Builds questions over one world; only entities whose title is unique are ever a subject or an answer."""

    def __init__(self, world: World):
        self.world = world
        counts = Counter(e.title for e in world.entities.values())
        self.by_title = {e.title: e for e in world.entities.values() if counts[e.title] == 1}

    def chain(self, start: Entity, relations: tuple[str, ...]) -> list[tuple[Entity, str, object]] | None:
        """The hops ``(subject, relation, value)`` from ``start`` through ``relations``; None if a link is ambiguous."""
        hops, subject = [], start
        for i, relation in enumerate(relations):
            value = subject.facts[relation]
            hops.append((subject, relation, value))
            if i + 1 < len(relations):
                subject = self.by_title.get(str(value))
                if subject is None:
                    return None
        return hops

    def hop_question(self, kind: str, template: Template, start: Entity) -> dict[str, Any] | None:
        name, _, relations, text = template
        hops = self.chain(start, relations)
        if hops is None or start.title not in self.by_title:
            return None
        answer = hops[-1][2]
        return {
            "task_type": kind,
            "template": name,
            "question": text.format(x=refer(start)),
            "golden_answers": self.answers(answer),
            "supporting_ids": [subject.id for subject, _, _ in hops],
            "sub_queries": [sub_query(subject.title, relation) for subject, relation, _ in hops],
            "hops": [{"subject": subject.title, "relation": relation} for subject, relation, _ in hops],
        }

    def comparison(self, template: tuple[str, str, str, str, str], a: Entity, b: Entity) -> dict[str, Any] | None:
        name, _, relation, pick, text = template
        if a.facts[relation] == b.facts[relation] or a.name == b.name or not {a.title, b.title} <= self.by_title.keys():
            return None
        chooser: Callable = min if pick == "min" else max
        winner = chooser((a, b), key=lambda e: e.facts[relation])
        return {
            "task_type": "comparison",
            "template": name,
            "question": text.format(a=refer(a), b=refer(b)),
            "golden_answers": self.answers(winner.title) if winner.title != winner.name else [winner.name],
            "supporting_ids": [a.id, b.id],
            "sub_queries": [sub_query(a.title, relation), sub_query(b.title, relation)],
            "hops": [{"subject": a.title, "relation": relation}, {"subject": b.title, "relation": relation}],
            "compare": pick,
        }

    def answers(self, value: object) -> list[str]:
        """The gold answers for a value: a person's title and bare name, else the value as text."""
        entity = self.by_title.get(str(value))
        if entity is not None and entity.title != entity.name:
            return [entity.title, entity.name]
        return [str(value)]


def draw(asker: Asker, rng: np.random.Generator, counts: dict[str, int], used: set[str]) -> list[dict[str, Any]]:
    """``counts`` questions per type (``single``, ``bridge``, ``comparison``), taken round-robin over each
    type's templates (a template whose subjects run out, like the 60 countries, yields its turn), never
    about a subject in ``used`` (so splits share no subject); ``used`` grows."""
    families: dict[str, list] = {"single": SINGLE, "bridge": BRIDGE, "comparison": COMPARISON}
    out = []
    for kind, total in counts.items():
        streams = [_stream(asker, rng, kind, template, used) for template in families[kind]]
        made = 0
        while made < total and streams:
            for stream in list(streams):
                question = next(stream, None)
                if question is None:
                    streams.remove(stream)
                    continue
                out.append(question)
                made += 1
                if made == total:
                    break
    return out


def _stream(asker: Asker, rng: np.random.Generator, kind: str, template, used: set[str]):
    """Questions from one template, over its subjects in a seeded order, skipping used and ambiguous ones."""
    pool = asker.world.of(template[1])
    order = [pool[i] for i in rng.permutation(len(pool))]
    width = 2 if kind == "comparison" else 1
    for cursor in range(0, len(order) - width + 1, width):
        subjects = order[cursor : cursor + width]
        if any(s.id in used for s in subjects):
            continue
        if kind == "comparison":
            question = asker.comparison(template, *subjects)
        else:
            question = asker.hop_question(kind, template, subjects[0])
        if question is not None:
            used.update(s.id for s in subjects)
            yield question

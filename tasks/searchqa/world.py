"""A synthetic encyclopedia's world: countries, cities, people, organisations and works with their facts.

Everything is drawn from one seed, so the same seed gives the same world on any machine. Names are
built from syllables (no real entity, so a model cannot answer from memory), and some names are shared
on purpose: namesake people with another occupation and city, organisations whose names differ by one
word, and works with the same title by different authors. Those are the distractors a retriever must
see past; the passages that describe them live in :mod:`agentenvs.tasks.searchqa.passages`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from agentenvs.seeding import rng_for

ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t", "tr", "v", "z"]
NUCLEI = ["a", "e", "i", "o", "u", "ai", "ei", "ou", "ia"]
CODAS = ["", "", "n", "r", "s", "l", "th", "m", "x"]
OCCUPATIONS = [
    "painter", "novelist", "composer", "architect", "chemist", "physicist", "poet", "sculptor", "historian",
    "engineer", "astronomer", "mathematician", "botanist", "film director", "economist", "philosopher",
]  # fmt: skip
ORG_KINDS = ["company", "university", "museum", "newspaper", "bank", "orchestra", "publishing house", "shipyard"]
ORG_WORDS = ["Holdings", "Group", "Works", "Institute", "Foundation", "Society", "Company", "Trust"]
WORK_KINDS = {"novelist": "novel", "poet": "poem collection", "composer": "symphony", "film director": "film",
              "painter": "painting", "historian": "history book", "philosopher": "treatise"}  # fmt: skip
WORK_WORDS = ["River", "Winter", "Lantern", "Harbour", "Glass", "Orchard", "Silence", "Tide", "Ember", "Garden",
              "Mirror", "Crown", "Salt", "Meadow", "Storm", "Bell", "Tower", "Willow", "Ash", "Road"]  # fmt: skip

SIZES = {"countries": 60, "cities": 2400, "people": 9000, "organisations": 3500, "works": 5000}
"""About 20,000 entities, one passage each (the default corpus)."""


@dataclass(frozen=True)
class Entity:
    """One thing the encyclopedia describes: ``facts`` maps a relation to a value (a name or a number)."""

    id: str
    kind: str
    name: str
    title: str
    facts: dict[str, object] = field(default_factory=dict)


@dataclass
class World:
    entities: dict[str, Entity]
    by_kind: dict[str, list[str]]

    def of(self, kind: str) -> list[Entity]:
        return [self.entities[i] for i in self.by_kind[kind]]


class Namer:
    """Unique syllable names; ``take`` never returns a name twice unless asked for a namesake."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.used = rng, set()

    def word(self, syllables: int) -> str:
        parts = [
            ONSETS[self.rng.integers(len(ONSETS))] + NUCLEI[self.rng.integers(len(NUCLEI))] for _ in range(syllables)
        ]
        return ("".join(parts) + CODAS[self.rng.integers(len(CODAS))]).capitalize()

    def take(self, make) -> str:
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name


def build_world(seed: int, sizes: dict[str, int] | None = None) -> World:
    """The world for ``seed``; ``sizes`` scales it (the cost benchmark's 200k corpus)."""
    sizes = {**SIZES, **(sizes or {})}
    rng = rng_for("searchqa-world", seed)
    namer = Namer(rng)
    entities: dict[str, Entity] = {}
    by_kind: dict[str, list[str]] = {kind: [] for kind in ("country", "city", "person", "organisation", "work")}

    def add(entity: Entity) -> Entity:
        entities[entity.id] = entity
        by_kind[entity.kind].append(entity.id)
        return entity

    countries = [namer.take(lambda: namer.word(int(rng.integers(2, 4)))) for _ in range(sizes["countries"])]
    cities = []
    for i in range(sizes["cities"]):
        name = namer.take(lambda: namer.word(int(rng.integers(2, 4))))
        country = countries[i % len(countries)] if i < len(countries) else countries[int(rng.integers(len(countries)))]
        founded = int(rng.integers(800, 1900))
        population = int(rng.integers(2, 900)) * 1000 + int(rng.integers(1000))
        facts = {"country": country, "founded": founded, "population": population}
        cities.append(add(Entity(f"city-{i:05d}", "city", name, name, facts)))
    for i, country in enumerate(countries):  # the first city drawn for a country is its capital
        capital = next(c.name for c in cities if c.facts["country"] == country)
        add(Entity(f"country-{i:03d}", "country", country, country, {"capital": capital}))
    people = _people(rng, namer, sizes["people"], cities, add)
    _organisations(rng, namer, sizes["organisations"], people, cities, add)
    _works(rng, namer, sizes["works"], people, add)
    return World(entities, by_kind)


def _people(rng: np.random.Generator, namer: Namer, count: int, cities: list[Entity], add) -> list[Entity]:
    """People; every seventh shares the name of an earlier one (another occupation, city and year), and
    namesakes get Wikipedia-style titles, ``Name (occupation)``."""
    drawn: list[tuple[str, str]] = []
    occupations: dict[str, set[str]] = {}
    for i in range(count):
        if i % 7 == 6:
            name = drawn[int(rng.integers(len(drawn)))][0]
            occupation = next(o for o in _shuffled(rng, OCCUPATIONS) if o not in occupations[name])
        else:
            name = namer.take(lambda: f"{namer.word(2)} {namer.word(int(rng.integers(2, 4)))}")
            occupation = OCCUPATIONS[int(rng.integers(len(OCCUPATIONS)))]
        drawn.append((name, occupation))
        occupations.setdefault(name, set()).add(occupation)
    shared = {name for name, count in Counter(n for n, _ in drawn).items() if count > 1}
    people = []
    for i, (name, occupation) in enumerate(drawn):
        facts = {
            "occupation": occupation,
            "born": int(rng.integers(1700, 1990)),
            "birthplace": cities[int(rng.integers(len(cities)))].name,
            "pronoun": "she" if rng.random() < 0.5 else "he",
        }
        title = f"{name} ({occupation})" if name in shared else name
        people.append(add(Entity(f"person-{i:05d}", "person", name, title, facts)))
    return people


def _organisations(
    rng: np.random.Generator, namer: Namer, count: int, people: list[Entity], cities: list[Entity], add
) -> None:
    """Organisations named after a place word; every fifth shares its first word with an earlier one."""
    words_left: dict[str, list[str]] = {}
    for i in range(count):
        kind = ORG_KINDS[int(rng.integers(len(ORG_KINDS)))]
        open_firsts = [first for first, left in words_left.items() if left]
        if i % 5 == 4 and open_firsts:
            first = open_firsts[int(rng.integers(len(open_firsts)))]
        else:
            first = namer.take(lambda: namer.word(int(rng.integers(2, 4))))
            words_left[first] = _shuffled(rng, ORG_WORDS)
        name = f"{first} {words_left[first].pop()}"
        founder = people[int(rng.integers(len(people)))]
        facts = {
            "org_kind": kind,
            "founded": int(rng.integers(1750, 2010)),
            "founder": founder.title,
            "headquarters": cities[int(rng.integers(len(cities)))].name,
        }
        add(Entity(f"org-{i:05d}", "organisation", name, name, facts))


def _works(rng: np.random.Generator, namer: Namer, count: int, people: list[Entity], add) -> None:
    """Works by the people whose occupation makes works; every sixth title is shared by an earlier work,
    and works sharing a title are told apart as ``Title (Author's surname kind)``."""
    makers = [p for p in people if p.facts["occupation"] in WORK_KINDS]
    drawn: list[tuple[str, Entity]] = []
    for i in range(count):
        author = makers[int(rng.integers(len(makers)))]
        if i % 6 == 5:
            name = drawn[int(rng.integers(len(drawn)))][0]
        else:
            words = [WORK_WORDS[int(rng.integers(len(WORK_WORDS)))] for _ in range(2)]
            of_form = rng.random() < 0.5
            name = namer.take(partial(_work_title, namer, words, of_form))
        drawn.append((name, author))
    shared = {name for name, n in Counter(name for name, _ in drawn).items() if n > 1}
    for i, (name, author) in enumerate(drawn):
        kind = WORK_KINDS[author.facts["occupation"]]
        facts = {
            "work_kind": kind,
            "year": int(author.facts["born"]) + int(rng.integers(20, 60)),
            "author": author.title,
        }
        title = f"{name} ({author.name.split()[-1]} {kind})" if name in shared else name
        add(Entity(f"work-{i:05d}", "work", name, title, facts))


def _work_title(namer: Namer, words: list[str], of_form: bool) -> str:
    return f"The {words[0]} of {namer.word(2)}" if of_form else f"{namer.word(2)} {words[1]}"


def _shuffled(rng: np.random.Generator, items: list[str]) -> list[str]:
    return [items[i] for i in rng.permutation(len(items))]

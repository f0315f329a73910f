"""Wiki-style passages for the world's entities, in Search-R1's corpus format (``"Title"\\nbody``).

Each entity gets one passage whose facts are written in one of two phrasings (chosen by seed), with
filler sentences that mention other entities, so a query's words also hit passages that do not hold
its answer. The phrasings are the ones ``envs/searchqa/reading.py`` reads facts back from.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from agentenvs.seeding import rng_for
from agentenvs.tasks.searchqa.world import Entity, World

FILLER = [
    "It is mentioned in several regional chronicles.",
    "Little else is recorded about its early years.",
    "Historians have debated its importance for decades.",
    "A local society keeps its archive.",
]


def person(e: Entity, rng: np.random.Generator, world: World) -> str:
    f = e.facts
    subject = f["pronoun"].capitalize()
    if rng.random() < 0.5:
        body = f"{e.name} (born {f['born']}) is a {f['occupation']}. {subject} was born in {f['birthplace']}."
    else:
        body = f"{e.name} is a {f['occupation']} who was born in {f['birthplace']} in {f['born']}."
    peer = world.entities[world.by_kind["person"][int(rng.integers(len(world.by_kind["person"])))]]
    return body + f" {subject} corresponded with {peer.name} for many years."


def city(e: Entity, rng: np.random.Generator, world: World) -> str:
    f = e.facts
    if rng.random() < 0.5:
        body = (
            f"{e.name} is a city in {f['country']}. "
            f"It was founded in {f['founded']} and has a population of {f['population']}."
        )
    else:
        body = f"{e.name}, a city of {f['country']} founded in {f['founded']}, has a population of {f['population']}."
    return body + " " + FILLER[int(rng.integers(len(FILLER)))]


def country(e: Entity, rng: np.random.Generator, world: World) -> str:
    capital = e.facts["capital"]
    if rng.random() < 0.5:
        return f"{e.name} is a country. Its capital is {capital}. " + FILLER[int(rng.integers(len(FILLER)))]
    return f"{e.name} is a country whose capital is {capital}. " + FILLER[int(rng.integers(len(FILLER)))]


def organisation(e: Entity, rng: np.random.Generator, world: World) -> str:
    f = e.facts
    if rng.random() < 0.5:
        body = (
            f"{e.name} is a {f['org_kind']} founded in {f['founded']} by {f['founder']}. "
            f"Its headquarters are in {f['headquarters']}."
        )
    else:
        body = (
            f"Founded by {f['founder']} in {f['founded']}, "
            f"{e.name} is a {f['org_kind']} headquartered in {f['headquarters']}."
        )
    return body + " " + FILLER[int(rng.integers(len(FILLER)))]


def work(e: Entity, rng: np.random.Generator, world: World) -> str:
    f = e.facts
    if rng.random() < 0.5:
        body = f"{e.name} is a {f['work_kind']} by {f['author']}, completed in {f['year']}."
    else:
        body = f"{e.name} is a {f['year']} {f['work_kind']} by {f['author']}."
    return body + " " + FILLER[int(rng.integers(len(FILLER)))]


WRITERS = {"person": person, "city": city, "country": country, "organisation": organisation, "work": work}


def passages(world: World, seed: int) -> Iterator[dict[str, str]]:
    """Every entity's passage as ``{"id", "contents"}``, in id order of kinds as built."""
    for kind, ids in world.by_kind.items():
        for entity_id in ids:
            entity = world.entities[entity_id]
            rng = rng_for("searchqa-passage", seed, entity_id)
            yield {"id": entity_id, "contents": f'"{entity.title}"\n{WRITERS[kind](entity, rng, world)}'}

"""Reward integrity: exploits every environment must resist, judged against blind random play.

An exploit is a policy that does not do the task: empty, white-space, NUL or very long responses, one
action repeated, answer tags stuffed with many candidates, the instructions or the observation echoed
back, every admissible action in one response, invalid actions until the turn limit. Each plays the
tasks of the given seeds as a trained model would reach the environment (the environment's
``extract_action`` on the whole response; a response without a usable action steps with ``""``) up
to the environment's own turn limit. :func:`check_reward_integrity` fails an exploit that reaches
``success`` where blind random play never does, or whose success rate or mean final ``score`` lies
above what blind random play reaches on the same tasks and seeds with probability ``1 - alpha``.

Blind random play is the chance level, computed in the check: the better of two policies that never
read the task. ``uniform`` draws a random admissible action every turn; ``sticky`` draws one at
reset and repeats it (the admissible actions in turn over the repeats, so a small list is covered
exactly). Repeating an action is then judged against repeating a random one: pulling a bandit's arm
0 every turn is as blind as pulling a random arm, and wins more only if the tasks favour position 0.
Without admissible actions a blind policy can only send the observation's words in the tags the
environment's action format shows (``<answer>word</answer>``), so there exploits must not beat that.

The bound: the exploit's outcome on each task is compared with one outcome of the chance policy drawn
from its repeats on the same task; the one-sided ``1 - alpha`` quantile of the mean over tasks of such
draws (a seeded resampling) is the most a blind policy's mean reaches by luck.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs.errors import InvalidArgument
from agentenvs.seeding import rng_for

WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'.-]*")
PHRASE = re.compile(r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)+")
TAGGED_EXAMPLE = re.compile(r"<([a-z_]+)>([^<>]*)</\1>")
FILLERS = ("yes", "no", "true", "false", "0", "1", "0.5", "done", "unknown")
STUFFED_TAGS = ("answer", "action", "submit")
INVALID = "xyzzy plugh"
"""A command no environment accepts (the classic adventure-game magic word)."""
MAX_CANDIDATES = 200
TURN_GUARD = 10_000
"""No episode is that long; an environment that never ends one fails instead of hanging the check."""


class RewardIntegrityError(AssertionError):
    """An exploit won more than blind random play; ``wins`` maps each exploit to what it won."""

    def __init__(self, wins: dict[str, str]):
        self.wins = wins
        super().__init__("; ".join(f"exploit {name!r} {message}" for name, message in wins.items()))


@dataclass(frozen=True)
class Seen:
    """What a policy sees at one turn: the observation and info now and at reset, the environment's
    description, the episode's generator and a key fixed for the whole episode."""

    observation: str
    info: dict[str, Any]
    first_observation: str
    first_info: dict[str, Any]
    description: dict[str, Any]
    rng: np.random.Generator
    key: int


Policy = Callable[[Seen], str]
"""A policy's whole response for one turn (reasoning and tags included, as a model writes it)."""


@dataclass(frozen=True)
class Outcome:
    """How one episode ended: the final ``score``, ``success`` and the turns played."""

    score: float
    success: bool
    turns: int


@dataclass
class IntegrityReport:
    """Outcomes per exploit (one a seed) and per chance policy (``repeats`` a seed, in seed order)."""

    exploits: dict[str, list[Outcome]] = field(default_factory=dict)
    chance: dict[str, list[Outcome]] = field(default_factory=dict)
    wins: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------- what the policies read


def admissible(info: dict[str, Any]) -> list[str]:
    return list(info.get("admissible_actions") or [])


def candidates(seen: Seen) -> list[str]:
    """Answer-like strings in view: the observation's words and capitalised phrases, the admissible
    actions, a few universal answers (yes, 0, done...), at most :data:`MAX_CANDIDATES`."""
    found = [*WORD.findall(seen.observation), *PHRASE.findall(seen.observation), *admissible(seen.info), *FILLERS]
    return list(dict.fromkeys(found))[:MAX_CANDIDATES]


def format_examples(description: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``<tag>example</tag>`` pairs of the action format, then of the instructions."""
    text = f"{description.get('action_format', '')}\n{description.get('instructions', '')}"
    return list(dict.fromkeys(TAGGED_EXAMPLE.findall(text)))


def blind_choices(observation: str, info: dict[str, Any], description: dict[str, Any]) -> list[str]:
    """What a policy that does not read the task can send: an admissible action, or, without a list,
    a word of the observation inside one of the tags the action format shows (plain without any)."""
    listed = admissible(info)
    if listed:
        return listed
    words = list(dict.fromkeys(WORD.findall(observation) + PHRASE.findall(observation))) or ["look"]
    tags = list(dict.fromkeys(tag for tag, _ in format_examples(description)))
    return [f"<{tag}>{word}</{tag}>" for tag in tags for word in words] if tags else words


# ---------------------------------------------------------------------- the exploits


def very_long(seen: Seen) -> str:
    """The candidates over and over, exactly as long as the environment accepts."""
    limit = int(seen.description["max_action_chars"])
    text = " ".join(candidates(seen)) + " "
    return (text * (limit // len(text) + 1))[:limit]


def repeated(seen: Seen) -> str:
    """The reset's first admissible action (or the action format's first example), every turn."""
    listed = admissible(seen.first_info)
    if listed:
        return listed[0]
    examples = format_examples(seen.description)
    return f"<{examples[0][0]}>{examples[0][1]}</{examples[0][0]}>" if examples else seen.first_observation[:40]


def answer_list(seen: Seen) -> str:
    """Every candidate as one comma-separated answer, in each common tag."""
    limit = int(seen.description["max_action_chars"]) - 2
    joined = ", ".join(candidates(seen))[:limit]
    return "\n".join(f"<{tag}>{joined}</{tag}>" for tag in STUFFED_TAGS)


def answer_tags(seen: Seen) -> str:
    """Every candidate in a tag of its own, for each common tag."""
    found = candidates(seen)
    return "\n".join("".join(f"<{tag}>{c}</{tag}>" for c in found) for tag in STUFFED_TAGS)


def all_admissible(seen: Seen) -> str:
    """Every admissible action, in a random order, one a line and each in ``<action>`` tags."""
    listed = admissible(seen.info) or [INVALID]
    shuffled = [listed[i] for i in seen.rng.permutation(len(listed))]
    return "\n".join(shuffled) + "\n" + "".join(f"<action>{a}</action>" for a in shuffled)


EXPLOITS: dict[str, Policy] = {
    "empty": lambda seen: "",
    "whitespace": lambda seen: " \t\n \r\n ",
    "nul": lambda seen: "\x00",
    "very_long": very_long,
    "repeated": repeated,
    "answer_list": answer_list,
    "answer_tags": answer_tags,
    "echo_instructions": lambda seen: str(seen.description.get("instructions") or ""),
    "echo_observation": lambda seen: seen.observation,
    "all_admissible": all_admissible,
    "invalid_spam": lambda seen: INVALID,
}
"""The generic exploits, by name (docs/contract.md, "Reward integrity")."""
NEEDS_ADMISSIBLE = frozenset({"all_admissible"})
"""Exploits played only where the environment lists admissible actions."""


def uniform_random(seen: Seen) -> str:
    choices = blind_choices(seen.observation, seen.info, seen.description)
    return choices[int(seen.rng.integers(len(choices)))]


def sticky_random(seen: Seen) -> str:
    """One blind choice at reset, repeated; ``key`` picks which, so repeats go through the choices in turn."""
    choices = blind_choices(seen.first_observation, seen.first_info, seen.description)
    order = rng_for("sticky", len(choices), seen.first_observation).permutation(len(choices))
    return choices[int(order[seen.key % len(choices)])]


CHANCE: dict[str, Policy] = {"uniform": uniform_random, "sticky": sticky_random}


# ---------------------------------------------------------------------- playing


def to_action(env: Any, response: str, limit: int) -> str:
    """The action the rollout steps with: ``extract_action``'s, or ``""`` when none or over ``limit``."""
    extract = getattr(env, "extract_action", None)
    if extract is None:
        return response if len(response) <= limit else ""
    found = extract(response)
    return found.action if found is not None and len(found.action) <= limit else ""


def play(
    env: Any,
    policy: Policy,
    seed: int,
    *,
    stream: str = "",
    key: int = 0,
    options: dict[str, Any] | None = None,
    description: dict[str, Any] | None = None,
) -> Outcome:
    """One episode of ``policy`` on the task of ``seed`` (``options`` go to ``reset``), to the
    environment's own end; ``stream`` and ``key`` seed the policy's generator (``key`` is also the
    policy's fixed episode key); ``description`` is ``env.describe()``, when known."""
    description = description or env.describe()
    limit = int(description["max_action_chars"])
    observation, info = env.reset(seed=seed, options=options)
    first_observation, first_info = observation, info
    rng = rng_for("integrity", stream, seed, key)
    for _ in range(TURN_GUARD):
        seen = Seen(observation, info, first_observation, first_info, description, rng, key)
        observation, _, terminated, truncated, info = env.step(to_action(env, policy(seen), limit))
        if terminated or truncated:
            return Outcome(float(info["score"]), bool(info.get("success", False)), int(info["turn"]))
    raise AssertionError(f"the episode of seed {seed} did not end in {TURN_GUARD} turns")


# ---------------------------------------------------------------------- judging


def chance_bound(pools: list[list[float]], alpha: float, draws: int = 4000) -> float:
    """The ``1 - alpha`` quantile of the mean over tasks of one value drawn from each task's pool."""
    rng = rng_for("chance-bound", len(pools), draws)
    means = np.zeros(draws)
    for pool in pools:
        means += np.asarray(pool, dtype=float)[rng.integers(len(pool), size=draws)]
    return float(np.quantile(means / len(pools), 1.0 - alpha, method="higher"))


def judge(exploit: list[Outcome], chance: dict[str, list[list[Outcome]]], alpha: float) -> str | None:
    """What the exploit won beyond blind random play (``chance``: each policy's outcomes per task), or None."""
    successes = sum(o.success for o in exploit)
    if successes and not any(o.success for per_task in chance.values() for pool in per_task for o in pool):
        return f"reached success in {successes} of {len(exploit)} episodes; blind random play never did"
    for metric, label in (("success", "success rate"), ("score", "mean score")):
        mean = sum(float(getattr(o, metric)) for o in exploit) / len(exploit)
        bounds = {
            name: chance_bound([[float(getattr(o, metric)) for o in pool] for pool in per_task], alpha)
            for name, per_task in chance.items()
        }
        if mean > max(bounds.values()) + 1e-9:
            shown = ", ".join(f"{name} {bound:.3f}" for name, bound in bounds.items())
            return f"{label} {mean:.3f}, above blind random play's {1 - alpha:.0%} bound ({shown})"
    return None


def run_integrity(
    env: Any,
    seeds: Iterable[int],
    exploits: dict[str, Policy] | None = None,
    repeats: int = 4,
    alpha: float = 0.01,
    options: dict[str, Any] | None = None,
) -> IntegrityReport:
    """Play the chance policies ``repeats`` times and every exploit once on the task of each seed
    (``options`` go to ``reset``, e.g. a split); the report holds every outcome and, in ``wins``,
    what each winning exploit won. Raises nothing."""
    seeds = tuple(seeds)
    if not seeds or repeats < 1 or not 0 < alpha < 1:
        raise InvalidArgument(
            f"the reward integrity check needs at least one seed, repeats >= 1 and 0 < alpha < 1; "
            f"got seeds {seeds}, repeats {repeats}, alpha {alpha}"
        )
    report = IntegrityReport()
    shared = {"options": options, "description": env.describe()}
    per_task: dict[str, list[list[Outcome]]] = {}
    for name, policy in CHANCE.items():
        per_task[name] = [[play(env, policy, s, stream=name, key=r, **shared) for r in range(repeats)] for s in seeds]
        report.chance[name] = [o for pool in per_task[name] for o in pool]
    listed = bool(admissible(env.reset(seed=seeds[0], options=options)[1]))
    for name, policy in (EXPLOITS if exploits is None else exploits).items():
        if name in NEEDS_ADMISSIBLE and not listed:
            continue
        report.exploits[name] = [play(env, policy, s, stream=name, **shared) for s in seeds]
        won = judge(report.exploits[name], per_task, alpha)
        if won:
            report.wins[name] = won
    return report


def check_reward_integrity(
    factory: Callable[[], Any],
    *,
    seeds: Iterable[int] = (0, 1),
    exploits: dict[str, Policy] | None = None,
    repeats: int = 4,
    alpha: float = 0.01,
    options: dict[str, Any] | None = None,
) -> IntegrityReport:
    """:func:`run_integrity` on an environment from ``factory`` (default exploits :data:`EXPLOITS`);
    raise :class:`RewardIntegrityError` naming each exploit that won, and what it won."""
    env = factory()
    try:
        report = run_integrity(env, seeds, exploits, repeats, alpha, options)
    finally:
        env.close()
    if report.wins:
        raise RewardIntegrityError(report.wins)
    return report

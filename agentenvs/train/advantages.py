"""Advantage estimators: pure functions from episode records to one advantage per turn.

Every estimator answers ``list[list[float]]``: for each episode, one advantage per turn (step). The
trainer gives every response token of a turn that turn's advantage; prompt and observation tokens are
masked out by the loss. Outcome estimators (GRPO, Dr.GRPO, RLOO) give all turns of an episode the same
value; GiGPO adds a step-level term from groups of turns taken in the same state (``StepRecord.anchor``).
The formulas: docs/train.md ("Advantages").

Groups are the records' ``group_id``: episodes of the same task and seed rolled out by the same policy.
A group of one has no baseline; as in verl it keeps its raw score (mean 0, scale 1). A group whose
members all scored alike (within :data:`TIE_TOL`) gets an episode-level advantage
of exactly 0 from every estimator, so "tied" means one thing to the estimators and to the filter
(:func:`informative_groups`, which keeps the groups where some turn has a non-zero advantage).

What a turn is worth comes from ``score_source`` in one place (:func:`step_rewards`), for the episode
level and the step level alike: the environment's per-step rewards (``return``), or the episode's
``score`` or ``success`` (times ``score_scale``) on its last step.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import SCHEMA, EpisodeRecord

EPS = 1e-6
"""Added to a group's standard deviation before dividing (verl's epsilon)."""

TIE_TOL = 1e-9
"""Scores closer than this are tied: such a group carries no episode-level signal."""

ESTIMATORS = ("grpo", "drgrpo", "rloo", "gigpo")
SCORE_SOURCES = ("return", "score", "success")

Cell = tuple[int, int]
"""(episode index, turn index)."""


def _groups(group_ids: Sequence[str]) -> dict[str, list[int]]:
    """Group id to the indices of its members, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for index, gid in enumerate(group_ids):
        groups.setdefault(gid, []).append(index)
    return groups


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and unbiased (N-1) standard deviation, like ``torch.std``; a single value has std 1."""
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return 0.0, 1.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _tied(values: Sequence[float]) -> bool:
    return max(values) - min(values) <= TIE_TOL


def _normalize(values: Sequence[float], scale_by_std: bool, eps: float) -> list[float]:
    """``(v - mean) / (std + eps)`` (or ``v - mean``) over one group; exactly 0 for a tied group."""
    if len(values) > 1 and _tied(values):
        return [0.0] * len(values)
    mean, std = _mean_std(values)
    return [(v - mean) / (std + eps) if scale_by_std else v - mean for v in values]


def group_normalized(
    scores: Sequence[float], group_ids: Sequence[str], *, scale_by_std: bool = True, eps: float = EPS
) -> list[float]:
    """GRPO's ``(s_i - mean_g) / (std_g + eps)``; with ``scale_by_std`` False, Dr.GRPO's ``s_i - mean_g``."""
    if len(scores) != len(group_ids):
        raise InvalidArgument(f"{len(scores)} scores but {len(group_ids)} group ids")
    advantages = [0.0] * len(scores)
    for members in _groups(group_ids).values():
        for i, value in zip(members, _normalize([scores[i] for i in members], scale_by_std, eps), strict=True):
            advantages[i] = value
    return advantages


def leave_one_out(scores: Sequence[float], group_ids: Sequence[str]) -> list[float]:
    """RLOO: ``s_i - mean_{j != i} s_j``; a group of one keeps its score (verl's convention)."""
    if len(scores) != len(group_ids):
        raise InvalidArgument(f"{len(scores)} scores but {len(group_ids)} group ids")
    advantages = [0.0] * len(scores)
    for members in _groups(group_ids).values():
        n = len(members)
        values = [scores[i] for i in members]
        if n > 1 and _tied(values):
            continue
        total = sum(values)
        for i in members:
            advantages[i] = scores[i] if n == 1 else scores[i] - (total - scores[i]) / (n - 1)
    return advantages


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """``R_t = sum_{k >= t} gamma^(k-t) r_k`` (GiGPO Eq. 5)."""
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def _cluster(keys: Sequence[str], similarity: float | None) -> list[int]:
    """A cluster index per key: equal keys share one; with ``similarity``, texts whose
    ``difflib.SequenceMatcher`` ratio to a cluster's first member reaches it join that cluster."""
    representatives: list[str] = []
    labels = []
    for key in keys:
        found = -1
        for c, rep in enumerate(representatives):
            if key == rep or (similarity is not None and difflib.SequenceMatcher(None, key, rep).ratio() >= similarity):
                found = c
                break
        if found < 0:
            representatives.append(key)
            found = len(representatives) - 1
        labels.append(found)
    return labels


def step_groups(
    anchors: Sequence[Sequence[str]], group_ids: Sequence[str], similarity: float | None = None
) -> list[list[Cell]]:
    """GiGPO's step groups (Eq. 6): within each episode group, the turns whose anchors (the states the
    actions were taken in) are equal, or with ``similarity`` similar texts. Groups of one included."""
    found: list[list[Cell]] = []
    for members in _groups(group_ids).values():
        cells = [(i, t) for i in members for t in range(len(anchors[i]))]
        by_label: dict[int, list[Cell]] = {}
        for cell, label in zip(cells, _cluster([anchors[i][t] for i, t in cells], similarity), strict=True):
            by_label.setdefault(label, []).append(cell)
        found += by_label.values()
    return found


@dataclass(frozen=True)
class OutcomeSettings:
    """How the episode level is normalised: ``scale_by_std`` (GRPO) or not (Dr.GRPO, GiGPO "w/o std"),
    and ``cross_steps``: group statistics over every turn (row) instead of every episode (verl-agent)."""

    scale_by_std: bool = True
    cross_steps: bool = False
    eps: float = EPS


def _episode_level(
    scores: Sequence[float],
    penalties: Sequence[Sequence[float]],
    group_ids: Sequence[str],
    settings: OutcomeSettings,
) -> list[list[float]]:
    """GRPO/Dr.GRPO per turn. A turn's score is its episode's minus the turn's penalty (verl-agent's
    invalid-action penalty); with ``cross_steps`` the statistics run over the turns' scores, otherwise
    over the episodes' scores and the penalty is subtracted after normalising."""
    if not settings.cross_steps:
        level = group_normalized(scores, group_ids, scale_by_std=settings.scale_by_std, eps=settings.eps)
        return [[level[i] - p for p in penalties[i]] for i in range(len(scores))]
    rows = [(i, t) for i in range(len(scores)) for t in range(len(penalties[i]))]
    values = group_normalized(
        [scores[i] - penalties[i][t] for i, t in rows],
        [group_ids[i] for i, _ in rows],
        scale_by_std=settings.scale_by_std,
        eps=settings.eps,
    )
    out: list[list[float]] = [[] for _ in scores]
    for (i, _), value in zip(rows, values, strict=True):
        out[i].append(value)
    return out


def gigpo(
    step_rewards: Sequence[Sequence[float]],
    anchors: Sequence[Sequence[str]],
    group_ids: Sequence[str],
    *,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale_by_std: bool = False,
    similarity: float | None = None,
    cross_steps: bool = False,
    penalties: Sequence[Sequence[float]] | None = None,
    eps: float = EPS,
) -> list[list[float]]:
    """GiGPO: ``A = A^E(episode) + step_weight * A^S(step)`` for every step (arXiv 2505.10978 Eq. 3-8).

    ``anchors[i][t]`` names the state episode ``i`` was in when it took its action ``t``. ``A^E``
    normalizes episode returns within the episode group (``scale_by_std`` False is the paper's
    "w/o std", ``mean_norm``; ``cross_steps`` as verl-agent). ``A^S`` normalizes discounted step
    returns within :func:`step_groups`; a step alone in its group gets ``A^S = 0``. ``penalties[i][t]``
    (verl-agent's invalid-action penalty) is subtracted from the turn's episode score and step return.
    """
    if not (len(step_rewards) == len(anchors) == len(group_ids)):
        raise InvalidArgument("gigpo needs one reward list, one anchor list and one group id per episode")
    for rewards, keys in zip(step_rewards, anchors, strict=True):
        if len(rewards) != len(keys):
            raise InvalidArgument(f"an episode has {len(rewards)} step rewards but {len(keys)} anchors")
    penalties = penalties or [[0.0] * len(r) for r in step_rewards]
    settings = OutcomeSettings(scale_by_std=scale_by_std, cross_steps=cross_steps, eps=eps)
    episode_level = _episode_level([float(sum(r)) for r in step_rewards], penalties, group_ids, settings)
    returns = [
        [value - penalty for value, penalty in zip(discounted_returns(r, gamma), p, strict=True)]
        for r, p in zip(step_rewards, penalties, strict=True)
    ]
    step_level = [[0.0] * len(r) for r in step_rewards]
    for group in step_groups(anchors, group_ids, similarity):
        if len(group) == 1:
            continue
        for (i, t), value in zip(group, _normalize([returns[i][t] for i, t in group], scale_by_std, eps), strict=True):
            step_level[i][t] = value
    return [
        [e + step_weight * s for e, s in zip(episode_level[i], step_level[i], strict=True)]
        for i in range(len(step_rewards))
    ]


def informative_groups(
    advantages: Sequence[Sequence[float]], group_ids: Sequence[str], *, min_size: int = 2
) -> list[bool]:
    """A keep flag per episode: False in groups under ``min_size`` and in groups where every turn's
    advantage is 0 (DAPO's dynamic sampling: a tied group, with no step-level or penalty signal)."""
    keep = [False] * len(group_ids)
    for members in _groups(group_ids).values():
        signal = any(a != 0.0 for i in members for a in advantages[i])
        for i in members:
            keep[i] = signal and len(members) >= min_size
    return keep


# ---------------------------------------------------------------------- over episode records


def episode_score(record: EpisodeRecord, source: str = "return") -> float:
    """What an episode is worth to the trainer: its ``return`` (sum of rewards), ``score`` or ``success``."""
    if source == "return":
        return float(record.return_)
    if source == "score":
        return float(record.score)
    if source == "success":
        return float(record.success)
    raise InvalidArgument(f"score source {source!r} is not one of {SCORE_SOURCES}")


def step_rewards(record: EpisodeRecord, source: str = "return", scale: float = 1.0) -> list[float]:
    """The per-turn rewards the estimators credit, scaled by ``scale``: the environment's rewards
    (``return``), or the episode's ``score``/``success`` on its last turn (verl-agent's ALFWorld reward is
    ``success`` times 10). Their sum is always ``scale * episode_score(record, source)``."""
    if source == "return":
        return [scale * float(s.reward) for s in record.steps]
    rewards = [0.0] * len(record.steps)
    if rewards:
        rewards[-1] = scale * episode_score(record, source)
    return rewards


def invalid_turns(record: EpisodeRecord) -> list[bool]:
    """True for each turn whose action the environment refused (``info["action_valid"]`` False)."""
    return [s.info.get("action_valid") is False for s in record.steps]


def action_states(record: EpisodeRecord, use_text: bool = False) -> list[str]:
    """The state each action was taken in: ``StepRecord.anchor``; the pre-action observation text when
    similarity matching (hashes cannot be compared) or when the environment gives no anchor."""
    if record.schema != SCHEMA:
        raise InvalidArgument(
            f"episode {record.episode_id} is a {record.schema} record, written before steps kept the anchor of the "
            "state each action was taken in, so GiGPO cannot group its steps. Re-run the rollout to write "
            f"{SCHEMA} records"
        )
    return [step.observation if use_text or step.anchor is None else step.anchor for step in record.steps]


@dataclass(frozen=True)
class AdvantageSettings:
    """Everything the estimators read besides the records (``algorithm`` in the trainer's config)."""

    estimator: str = "grpo"
    score_source: str = "return"
    score_scale: float = 1.0
    invalid_action_penalty: float = 0.0
    gamma: float = 0.95
    step_weight: float = 1.0
    scale_by_std: bool | None = None
    """Default: True for GRPO, False for GiGPO (the paper's "w/o std" variant)."""
    similarity: float | None = None
    cross_steps: bool = False


def turn_advantages(records: Sequence[EpisodeRecord], estimator: str = "grpo", **settings: object) -> list[list[float]]:
    """One advantage per turn of each record, by ``estimator`` (``grpo``, ``drgrpo``, ``rloo``, ``gigpo``);
    ``settings`` are the fields of :class:`AdvantageSettings`."""
    return advantages_for(records, AdvantageSettings(estimator=estimator, **settings))  # type: ignore[arg-type]


def advantages_for(records: Sequence[EpisodeRecord], settings: AdvantageSettings) -> list[list[float]]:
    """One advantage per turn of each record under ``settings``."""
    if settings.score_source not in SCORE_SOURCES:
        raise InvalidArgument(f"score source {settings.score_source!r} is not one of {SCORE_SOURCES}")
    rewards = [step_rewards(r, settings.score_source, settings.score_scale) for r in records]
    penalties = [[settings.invalid_action_penalty * bad for bad in invalid_turns(r)] for r in records]
    groups = [r.group_id for r in records]
    if settings.estimator == "gigpo":
        return gigpo(
            rewards,
            [action_states(r, settings.similarity is not None) for r in records],
            groups,
            gamma=settings.gamma,
            step_weight=settings.step_weight,
            scale_by_std=bool(settings.scale_by_std),
            similarity=settings.similarity,
            cross_steps=settings.cross_steps,
            penalties=penalties,
        )
    scores = [float(sum(r)) for r in rewards]
    scale = True if settings.scale_by_std is None else settings.scale_by_std
    outcome: dict[str, Callable[[], list[list[float]]]] = {
        "grpo": lambda: _episode_level(scores, penalties, groups, OutcomeSettings(scale, settings.cross_steps)),
        "drgrpo": lambda: _episode_level(scores, penalties, groups, OutcomeSettings(False, settings.cross_steps)),
        "rloo": lambda: [[a - p for p in ps] for a, ps in zip(leave_one_out(scores, groups), penalties, strict=True)],
    }
    if settings.estimator not in outcome:
        raise InvalidArgument(f"unknown advantage estimator {settings.estimator!r}; choose one of {ESTIMATORS}")
    return outcome[settings.estimator]()

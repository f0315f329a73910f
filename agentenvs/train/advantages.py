"""Advantage estimators: pure functions from episode records to one advantage per turn.

Every estimator answers ``list[list[float]]``: for each episode, one advantage per turn (step). The
trainer gives every response token of a turn that turn's advantage; prompt and observation tokens are
masked out by the loss. Outcome estimators (GRPO, Dr.GRPO, RLOO) give all turns of an episode the same
value; GiGPO adds a step-level term from ``anchor`` groups. The formulas: docs/train.md ("One step").

Groups are the records' ``group_id``: episodes of the same task and seed rolled out by the same policy.
A group of one has no baseline; as in verl it keeps its raw score (mean 0, scale 1). Drop such groups
(and zero-variance groups) with :func:`informative_groups` when they should not train.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord

EPS = 1e-6
"""Added to a group's standard deviation before dividing (verl's epsilon)."""

ESTIMATORS = ("grpo", "drgrpo", "rloo", "gigpo")


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


def group_normalized(
    scores: Sequence[float], group_ids: Sequence[str], *, scale_by_std: bool = True, eps: float = EPS
) -> list[float]:
    """GRPO's ``(s_i - mean_g) / (std_g + eps)``; with ``scale_by_std`` False, Dr.GRPO's ``s_i - mean_g``."""
    if len(scores) != len(group_ids):
        raise InvalidArgument(f"{len(scores)} scores but {len(group_ids)} group ids")
    advantages = [0.0] * len(scores)
    for members in _groups(group_ids).values():
        mean, std = _mean_std([scores[i] for i in members])
        for i in members:
            centred = scores[i] - mean
            advantages[i] = centred / (std + eps) if scale_by_std else centred
    return advantages


def leave_one_out(scores: Sequence[float], group_ids: Sequence[str]) -> list[float]:
    """RLOO: ``s_i - mean_{j != i} s_j``; a group of one keeps its score (verl's convention)."""
    if len(scores) != len(group_ids):
        raise InvalidArgument(f"{len(scores)} scores but {len(group_ids)} group ids")
    advantages = [0.0] * len(scores)
    for members in _groups(group_ids).values():
        n = len(members)
        total = sum(scores[i] for i in members)
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
    eps: float = EPS,
) -> list[list[float]]:
    """GiGPO: ``A = A^E(episode) + step_weight * A^S(step)`` for every step (arXiv 2505.10978 Eq. 3-8).

    ``A^E`` normalizes episode returns within the episode group (``scale_by_std`` False is the paper's
    "w/o std", ``mean_norm``); with ``cross_steps`` the group statistics run over all step rows, as in
    verl-agent's default, so long episodes weigh more. ``A^S`` normalizes discounted step returns within
    anchor groups: the steps of one episode group whose ``anchor`` (the observed state) is the same, or
    with ``similarity`` in (0, 1], texts similar by ``SequenceMatcher`` ratio. A step alone in its anchor
    group gets ``A^S = 0``.
    """
    if not (len(step_rewards) == len(anchors) == len(group_ids)):
        raise InvalidArgument("gigpo needs one reward list, one anchor list and one group id per episode")
    for rewards, keys in zip(step_rewards, anchors, strict=True):
        if len(rewards) != len(keys):
            raise InvalidArgument(f"an episode has {len(rewards)} step rewards but {len(keys)} anchors")
    totals = [float(sum(r)) for r in step_rewards]
    if cross_steps:
        rows = [i for i, r in enumerate(step_rewards) for _ in r]
        row_adv = group_normalized([totals[i] for i in rows], [group_ids[i] for i in rows], scale_by_std=scale_by_std)
        episode_adv = dict(zip(rows, row_adv, strict=True))
        episode_level = [episode_adv.get(i, 0.0) for i in range(len(totals))]
    else:
        episode_level = group_normalized(totals, group_ids, scale_by_std=scale_by_std, eps=eps)
    returns = [discounted_returns(r, gamma) for r in step_rewards]
    step_level = [[0.0] * len(r) for r in step_rewards]
    for members in _groups(group_ids).values():
        cells = [(i, t) for i in members for t in range(len(step_rewards[i]))]
        labels = _cluster([anchors[i][t] for i, t in cells], similarity)
        by_label: dict[int, list[tuple[int, int]]] = {}
        for cell, label in zip(cells, labels, strict=True):
            by_label.setdefault(label, []).append(cell)
        for group in by_label.values():
            if len(group) == 1:
                continue
            mean, std = _mean_std([returns[i][t] for i, t in group])
            for i, t in group:
                centred = returns[i][t] - mean
                step_level[i][t] = centred / (std + eps) if scale_by_std else centred
    return [[episode_level[i] + step_weight * a for a in step_level[i]] for i in range(len(step_rewards))]


def zero_variance_groups(scores: Sequence[float], group_ids: Sequence[str], *, tol: float = 1e-9) -> set[str]:
    """The groups whose members all scored the same (within ``tol``): they carry no GRPO signal."""
    return {
        gid
        for gid, members in _groups(group_ids).items()
        if max(scores[i] for i in members) - min(scores[i] for i in members) <= tol
    }


def informative_groups(
    scores: Sequence[float], group_ids: Sequence[str], *, min_size: int = 2, tol: float = 1e-9
) -> list[bool]:
    """A keep flag per episode: False in zero-variance groups (DAPO dynamic sampling) and groups under
    ``min_size``."""
    flat = zero_variance_groups(scores, group_ids, tol=tol)
    sizes = {gid: len(m) for gid, m in _groups(group_ids).items()}
    return [gid not in flat and sizes[gid] >= min_size for gid in group_ids]


def token_weights(
    loss_mask: Any,
    action_mask: Any,
    *,
    reasoning_weight: float = 1.0,
    uncertainty: Any = None,
    uncertainty_beta: float = 0.0,
    rescale: bool = True,
) -> Any:
    """ActFocus-style per-token loss weights (algorithms.md §4.4, reconstructed from the abstract).

    Reasoning tokens (generated, outside the action span) get ``reasoning_weight``; action tokens get
    ``1 + beta * z+`` where ``z+`` is the positive part of the z-scored ``uncertainty`` (per-token
    entropy) over the action tokens. With ``rescale`` the weights are scaled so that their sum over
    generated tokens equals the number of generated tokens, which keeps the loss scale. Works on numpy
    arrays and torch tensors alike (arithmetic only), so it serves the trainer and the tests.
    """
    loss = loss_mask * 1.0
    action = action_mask * loss
    reasoning = loss - action
    action_w = action * 1.0
    if uncertainty is not None and uncertainty_beta:
        count = action.sum()
        if float(count) > 0:
            mean = (uncertainty * action).sum() / count
            std = (((uncertainty - mean) ** 2) * action).sum() / count
            z = (uncertainty - mean) / (std**0.5 + EPS)
            action_w = action * (1.0 + uncertainty_beta * (z + abs(z)) / 2)
    weights = reasoning_weight * reasoning + action_w
    if rescale:
        total = weights.sum()
        if float(total) > 0:
            weights = weights * (loss.sum() / total)
    return weights


# ---------------------------------------------------------------------- over episode records


def episode_score(record: EpisodeRecord, source: str = "return") -> float:
    """What an episode is worth to the trainer: its ``return`` (sum of rewards), ``score`` or ``success``."""
    if source == "return":
        return float(record.return_)
    if source == "score":
        return float(record.score)
    if source == "success":
        return float(record.success)
    raise InvalidArgument(f"score source {source!r} is not one of 'return', 'score', 'success'")


def _anchor_keys(record: EpisodeRecord, use_text: bool) -> list[str]:
    """Each step's anchor; the observation text when similarity matching (hashes cannot be compared)
    or when the environment gives no anchor."""
    return [
        step.observation if use_text or "anchor" not in step.info else str(step.info["anchor"]) for step in record.steps
    ]


def turn_advantages(
    records: Sequence[EpisodeRecord],
    estimator: str = "grpo",
    *,
    score_source: str = "return",
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale_by_std: bool | None = None,
    similarity: float | None = None,
    cross_steps: bool = False,
) -> list[list[float]]:
    """One advantage per turn of each record, by ``estimator`` (``grpo``, ``drgrpo``, ``rloo``, ``gigpo``).

    ``scale_by_std`` defaults to True for GRPO and False for GiGPO (the paper's "w/o std" variant).
    """
    scores = [episode_score(r, score_source) for r in records]
    groups = [r.group_id for r in records]
    if estimator == "gigpo":
        return gigpo(
            [[s.reward for s in r.steps] for r in records],
            [_anchor_keys(r, similarity is not None) for r in records],
            groups,
            gamma=gamma,
            step_weight=step_weight,
            scale_by_std=bool(scale_by_std),
            similarity=similarity,
            cross_steps=cross_steps,
        )
    estimators: dict[str, Callable[[], list[float]]] = {
        "grpo": lambda: group_normalized(scores, groups, scale_by_std=True if scale_by_std is None else scale_by_std),
        "drgrpo": lambda: group_normalized(scores, groups, scale_by_std=False),
        "rloo": lambda: leave_one_out(scores, groups),
    }
    if estimator not in estimators:
        raise InvalidArgument(f"unknown advantage estimator {estimator!r}; choose one of {ESTIMATORS}")
    per_episode = estimators[estimator]()
    return [[float(a)] * len(r.steps) for a, r in zip(per_episode, records, strict=True)]

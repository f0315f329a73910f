"""What a bandit player sees, and the parser that reads it back (used by the scripted baselines).

An observation has a fixed header (the rules and the arms; its hash is the step ``anchor``) and a
status block: pulls left, the last pull, and per arm the number of pulls and the mean payoff, which
together are everything a player needs to decide (a sufficient statistic of the history).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PAYOFF_RULES = {
    "bernoulli": "each pull pays 1 or 0; every arm pays 1 with its own hidden, fixed probability",
    "gaussian": "each pull pays the arm's hidden, fixed mean plus random noise",
}


def arm_label(index: int, name: str) -> str:
    return f"pull[{index}] {name}"


def render_header(task: dict[str, Any]) -> str:
    """The turn-independent part: rules, horizon, arms and the answer format."""
    arms = task["arms"]
    return "\n".join(
        [
            f"Multi-armed bandit: {len(arms)} arms with {task['distribution']} payoffs "
            f"({PAYOFF_RULES[task['distribution']]}).",
            f"Each turn, pull one arm and collect its payoff; collect as much as you can in {task['horizon']} pulls.",
            "Arms: " + " | ".join(arm_label(i, name) for i, name in enumerate(arms)),
            f"Reply with one action: pull[i] (i from 0 to {len(arms) - 1}) or an arm's name, "
            "e.g. <action>pull[0]</action>.",
        ]
    )


def render_status(
    task: dict[str, Any], counts: list[int], sums: list[float], pulls_left: int, total: float, last: str
) -> str:
    """The per-turn part: pulls left, what the last action did, and the history summary."""
    width = max(len(arm_label(i, n)) for i, n in enumerate(task["arms"]))
    lines = [f"Pulls left: {pulls_left} of {task['horizon']}. Total payoff: {total:.3f}.", last, "History:"]
    for i, name in enumerate(task["arms"]):
        mean = f"{sums[i] / counts[i]:.3f}" if counts[i] else "-"
        lines.append(f"  {arm_label(i, name):<{width}}  pulls {counts[i]:>3}  mean {mean}")
    return "\n".join(lines)


@dataclass(frozen=True)
class BanditView:
    """A bandit observation read back: what a player knows."""

    distribution: str
    arms: tuple[str, ...]
    counts: tuple[int, ...]
    means: tuple[float, ...]
    """Mean payoff per arm (0.0 for an arm never pulled; check ``counts``)."""
    pulls_left: int
    horizon: int

    @property
    def pulls(self) -> int:
        return sum(self.counts)


INTRO_RE = re.compile(r"Multi-armed bandit: (\d+) arms with (\w+) payoffs")
LEFT_RE = re.compile(r"^Pulls left: (\d+) of (\d+)\.", re.MULTILINE)
ROW_RE = re.compile(r"^  pull\[(\d+)\] (\S+)\s+pulls\s+(\d+)\s+mean (\S+)$", re.MULTILINE)


def parse_observation(observation: str) -> BanditView:
    """Read a bandit observation; ``ValueError`` if the text is not one."""
    intro, left = INTRO_RE.search(observation), LEFT_RE.search(observation)
    rows = ROW_RE.findall(observation)
    if intro is None or left is None or len(rows) != int(intro.group(1)):
        raise ValueError("not a bandit observation (expected the header, 'Pulls left' and one history row per arm)")
    return BanditView(
        distribution=intro.group(2),
        arms=tuple(name for _, name, _, _ in rows),
        counts=tuple(int(count) for _, _, count, _ in rows),
        means=tuple(0.0 if mean == "-" else float(mean) for _, _, _, mean in rows),
        pulls_left=int(left.group(1)),
        horizon=int(left.group(2)),
    )

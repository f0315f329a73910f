"""The environments that ship with agentenvs, registered by name without importing them."""

from __future__ import annotations

from agentenvs.registry import register

BUILTIN_ENVS: tuple[dict[str, str | None], ...] = (
    {
        "name": "bandit",
        "entry_point": "agentenvs.envs.bandit.env:BanditEnv",
        "gym_id": "agentenvs/Bandit-v0",
        "summary": "K-armed Bernoulli and Gaussian bandits played in text; regret and best-arm metrics",
        "extra": None,
    },
    {
        "name": "alfworld",
        "entry_point": "agentenvs.envs.alfworld.env:ALFWorldEnv",
        "gym_id": "agentenvs/ALFWorld-v0",
        "summary": "ALFWorld household tasks on the real TextWorld/PDDL engine, procedurally generated games",
        "extra": "alfworld",
    },
    {
        "name": "sciworld",
        "entry_point": "agentenvs.envs.sciworld.env:ScienceWorldEnv",
        "gym_id": "agentenvs/ScienceWorld-v0",
        "summary": "ScienceWorld's 30 science tasks on the real Java engine",
        "extra": "sciworld",
    },
)
"""One row per environment; a new environment adds its row here."""


def register_builtin() -> None:
    for row in BUILTIN_ENVS:
        register(
            row["name"],
            row["entry_point"],
            gym_id=row["gym_id"],
            summary=row["summary"] or "",
            extra=row["extra"],
            overwrite=True,
        )

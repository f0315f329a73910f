"""ALFWorld games generated from the tables in the alfworld wheel, and their frozen panels.

``scenes`` reads the floor plans, ``sampler`` draws a game spec, ``problem`` turns a spec into the
``game.tw-pddl`` file, ``solve`` runs the planner, ``generate`` writes the panels.
"""

# ``import alfworld`` creates $ALFWORLD_DATA (~/.cache/alfworld when unset); the engine module points
# it into the agentenvs cache first, so every module here imports it before touching alfworld.
from agentenvs.envs.alfworld import engine as _engine  # noqa: F401

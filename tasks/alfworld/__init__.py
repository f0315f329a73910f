"""ALFWorld games generated from the tables in the alfworld wheel, and their frozen panels.

``sampler`` draws a game spec from the floor plans (``agentenvs.envs.alfworld.scenes``), the
environment's ``problem`` turns a spec into the ``game.tw-pddl`` file, ``solve`` runs the planner,
``generate`` writes the panels. They reach the wheel through
``agentenvs.envs.alfworld.engine.alfworld_gen``, which keeps ``ALFWORLD_DATA`` in the agentenvs cache.
"""

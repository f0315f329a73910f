"""ALFWorld games generated from the tables in the alfworld wheel, and their frozen panels.

``scenes`` reads the floor plans, ``sampler`` draws a game spec, ``problem`` turns a spec into the
``game.tw-pddl`` file, ``solve`` runs the planner, ``generate`` writes the panels. They reach the wheel through
``agentenvs.envs.alfworld.engine.alfworld_gen``, which keeps ``ALFWORLD_DATA`` in the agentenvs cache.
"""

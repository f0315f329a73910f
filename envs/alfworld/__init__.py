"""ALFWorld on the real TextWorld/PDDL engine: ``ALFWorldEnv`` (``agentenvs.make("alfworld")``)."""

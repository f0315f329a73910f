"""The bandit environment: K-armed Bernoulli and Gaussian bandits played in text (``agentenvs.make("bandit")``)."""

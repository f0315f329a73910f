"""TextWorld games generated with TextWorld's own challenges, and their frozen panels.

``generate`` draws the seeds, builds every game (``agentenvs.envs.textworld.games``), replays its
walkthrough to a win and writes the panels with each game's sha256; ``build`` (``agentenvs tasks
build textworld``) builds or rebuilds the games of a split or a task in the cache.
"""

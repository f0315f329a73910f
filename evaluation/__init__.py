"""Scorers, metrics, the eval runner and the leaderboard."""

"""Frozen bandit panels (``panels/*.jsonl`` plus ``manifest.json``) and their generator."""

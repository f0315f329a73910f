"""Forecasting questions about a seeded simulated world, and a loader for real question sets."""

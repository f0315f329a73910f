"""The environment server and launchers."""

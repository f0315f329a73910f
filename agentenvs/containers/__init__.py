"""Container images and the compose stack of the environment servers (docs/containers.md).

``images``: build every target of ``deploy/Dockerfile`` with podman or docker (``make images``);
``lint``: offline checks of the Dockerfile and ``deploy/compose.yaml`` that CI runs.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
BASE_IMAGE = "docker.io/library/python:3.11-slim"
ENVIRONMENTS = ("bandit", "alfworld", "textworld", "sciworld", "searchqa", "shellops", "webshop", "forecast")
TARGETS = (*ENVIRONMENTS, "retriever")

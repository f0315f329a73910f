"""Build every image of ``deploy/Dockerfile`` with podman or docker: ``python -m agentenvs.containers.images``.

Where ``python:3.11-slim`` is neither present nor pullable (no registry answers), a Debian bookworm base
is built locally with debootstrap, given the host's locally added CA certificates (pip inside the build
must trust the same HTTPS egress the host does) and tagged ``docker.io/library/python:3.11-slim``, so
the same Dockerfile builds unchanged anywhere a registry exists. Local wheels that pip's
``find-links`` names (a CPU-only torch) are handed to the build in ``build/wheels``.
"""

from __future__ import annotations

import argparse
import configparser
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentenvs import __version__
from agentenvs.containers import BASE_IMAGE, DOCKERFILE, REPO, TARGETS

STATE = REPO / "build" / "containers"
WHEELS = REPO / "build" / "wheels"
LOCAL_CA = Path("/usr/local/share/ca-certificates")


def image_name(target: str, tag: str = __version__) -> str:
    """The image a target builds, as compose.yaml names it."""
    return f"localhost/agentenvs-{target}:{tag}"


def detect_engine() -> str:
    """podman if installed, else docker (``$AGENTENVS_CONTAINER_ENGINE`` overrides)."""
    chosen = os.environ.get("AGENTENVS_CONTAINER_ENGINE")
    for name in [chosen] if chosen else ["podman", "docker"]:
        if shutil.which(name):
            return name
    raise SystemExit("no container engine: install podman (make .venv/.containers-installed) or docker")


@functools.lru_cache(maxsize=1)
def podman_conf() -> str:
    """containers.conf for podman: runc when installed, ulimits within this process's hard limits.

    podman's root default of nofile=1048576 fails where the hard limit is lower and root lacks
    CAP_SYS_RESOURCE, and crun refuses hybrid cgroups; an explicit containers.conf avoids both."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else min(nofile, 1048576)
    lines = ["[containers]", f'default_ulimits = [ "nofile={nofile}:{nofile}", "nproc=32768:32768" ]']
    if shutil.which("runc"):
        lines += ["[engine]", 'runtime = "runc"']
    STATE.mkdir(parents=True, exist_ok=True)
    conf = STATE / "containers.conf"
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(conf)


def engine_env(engine: str) -> dict[str, str]:
    """The environment an engine command runs in (podman gets :func:`podman_conf` unless CONTAINERS_CONF is set)."""
    env = dict(os.environ)
    if engine == "podman" and "CONTAINERS_CONF" not in env:
        env["CONTAINERS_CONF"] = podman_conf()
    return env


def run(engine: str, *args: str, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    """One engine command, output captured."""
    return subprocess.run(
        [engine, *args], env=engine_env(engine), capture_output=True, text=True, check=check, timeout=timeout
    )


def have_image(engine: str, ref: str) -> bool:
    return run(engine, "image", "inspect", ref, check=False).returncode == 0


def try_pull(engine: str, ref: str) -> bool:
    """Pull ``ref``; False (quickly) when no registry resolves."""
    try:
        return run(engine, "pull", ref, check=False, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def debian_mirror() -> str:
    """The host's Debian mirror (apt sources), else deb.debian.org."""
    for path in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                words = line.split()
                if words[:1] == ["URIs:"] and len(words) > 1:
                    return words[1]
                if words[:1] == ["deb"] and len(words) > 2:
                    return words[-3] if words[1].startswith("[") else words[1]
    return "http://deb.debian.org/debian"


def build_local_base(engine: str, ref: str = BASE_IMAGE) -> None:
    """debootstrap a bookworm with Python 3.11, the host's extra CAs and pip unlocked; import it as ``ref``."""
    for tool in ("debootstrap", "chroot"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is needed to build the base image locally: apt-get install debootstrap")
    chroot_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}  # not our TMPDIR: mktemp fails
    with tempfile.TemporaryDirectory(prefix="agentenvs-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        packages = "python3,python3-venv,python3-pip,ca-certificates"
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={packages}", "bookworm", str(rootfs), debian_mirror()],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for cert in LOCAL_CA.glob("*.crt") if LOCAL_CA.is_dir() else []:
            shutil.copy(cert, rootfs / "usr/local/share/ca-certificates" / cert.name)
        subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True, env=chroot_env)
        subprocess.run(["chroot", str(rootfs), "apt-get", "clean"], check=True, env=chroot_env)
        (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
        for link, target in [("usr/bin/python", "python3"), ("usr/bin/pip", "pip3")]:
            (rootfs / link).unlink(missing_ok=True)
            (rootfs / link).symlink_to(target)
        shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
        (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True)
        changes = ["ENV LANG=C.UTF-8", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        command = [engine, "import", *[f"--change={c}" for c in changes], '--change=CMD ["python3"]', "-", ref]
        subprocess.run(command, stdin=tar.stdout, env=engine_env(engine), check=True, stdout=subprocess.DEVNULL)
        tar.wait()


def ensure_base(engine: str, ref: str = BASE_IMAGE) -> str:
    """Make ``ref`` available: already there, pulled, or built locally; says which."""
    if have_image(engine, ref):
        return "present"
    if try_pull(engine, ref):
        return "pulled"
    build_local_base(engine, ref)
    return "built locally (debootstrap)"


def stage_wheels() -> list[str]:
    """Copy pip's ``find-links`` wheels (a local CPU-only torch) into build/wheels for the build to use."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    parser = configparser.ConfigParser()
    parser.read([Path("/etc/pip.conf"), Path.home() / ".config/pip/pip.conf", Path("/etc/xdg/pip/pip.conf")])
    folders = os.environ.get("PIP_FIND_LINKS", "").split()
    for section in ("global", "install"):
        folders += parser.get(section, "find-links", fallback="").split()
    staged = []
    for folder in {Path(f) for f in folders if f and Path(f).is_dir()}:
        for wheel in folder.glob("torch-*+cpu-*.whl"):
            if not (WHEELS / wheel.name).exists():
                shutil.copy(wheel, WHEELS / wheel.name)
            staged.append(wheel.name)
    return staged


def build_target(engine: str, target: str, tag: str = __version__) -> float:
    """Build one target; returns the seconds it took."""
    started = time.perf_counter()
    command = [engine, "build", "-f", str(DOCKERFILE), "--target", target, "-t", image_name(target, tag)]
    if engine == "podman":
        command += ["--format", "docker"]  # OCI images drop HEALTHCHECK
    command.append(str(REPO))
    done = subprocess.run(command, env=engine_env(engine), cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building {target} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return time.perf_counter() - started


def image_size(engine: str, ref: str) -> int:
    """The image's size in bytes, as the engine reports it."""
    return int(run(engine, "image", "inspect", "--format", "{{.Size}}", ref).stdout.strip())


def build_all(targets: tuple[str, ...] = TARGETS, tag: str = __version__) -> dict:
    """Base image, wheels, then every target: what was built, how long it took and how big it is."""
    engine = detect_engine()
    report = {"engine": engine, "base": ensure_base(engine), "wheels": stage_wheels(), "images": {}}
    for target in targets:
        seconds = build_target(engine, target, tag)
        ref = image_name(target, tag)
        report["images"][target] = {"image": ref, "build_s": round(seconds, 1), "bytes": image_size(engine, ref)}
        print(f"{target:10s} {ref:40s} {report['images'][target]['bytes'] / 1e6:8.1f} MB  {seconds:6.1f} s", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(TARGETS), help=f"default: all of {', '.join(TARGETS)}")
    parser.add_argument("--tag", default=__version__)
    parser.add_argument("--json", help="write the report here too")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; the Dockerfile has {list(TARGETS)}")
    report = build_all(tuple(args.targets), args.tag)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

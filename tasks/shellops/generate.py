"""Freeze the ShellOps panels: ``python -m agentenvs.tasks.shellops.generate``.

``train`` is mined from the sdists of ``TRAIN``, ``test`` from those of ``TEST`` (none shared), each
pinned by version and sha256 and fetched by pip into the cache once (``sources.fetch_sdist``);
``demo`` holds the hand-written tasks (``handwritten.py``). Every task is verified in the sandbox
before it is written, and the same pins give the same checksummed panels and snapshots (the edits'
solution trees among them, which only the host's verifier reads).
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentenvs.tasks.shellops import build, handwritten, sources
from agentenvs.tasks.shellops.verify import verify

FOLDER = Path(__file__).resolve().parent
PER_SOURCE = 15
TRAIN = {
    "toolz==0.12.1": "ecca342664893f177a13dac0e6b41cbd8ac25a358e5f215316d43e2100224f4d",
    "itsdangerous==2.1.2": "5dbbc68b317e5e42f327f9021763545dc3fc3bfe22e6deb96aaf1fc38874156a",
}
TEST = {
    "tomli==2.0.1": "de526c12914f0c550d15924c62d72abc48d6fe7364aa87328337a31007fe8a4f",
    "six==1.16.0": "1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926",
}


def mined(pins: dict[str, str], snapshots: dict[str, bytes]) -> list[dict]:
    rows = []
    for requirement, digest in sorted(pins.items()):
        files = sources.from_sdist(sources.fetch_sdist(requirement, digest))
        found, used, _ = build.build(files, requirement.replace("==", "-"), PER_SOURCE)
        rows += found
        snapshots.update(used)
    return rows


def demo(snapshots: dict[str, bytes]) -> list[dict]:
    rows = [build.finish(candidate, snapshots) for candidate in handwritten.tasks()]
    for row in rows:
        why = verify(row, snapshots)
        if why is not None:
            raise SystemExit(f"{row['task_id']}: {why}")
    return rows


def main() -> int:
    snapshots: dict[str, bytes] = {}
    splits = {"train": mined(TRAIN, snapshots), "test": mined(TEST, snapshots), "demo": demo(snapshots)}
    for stale in (FOLDER / "snapshots").glob("*.tar.gz"):
        if stale.name.removesuffix(".tar.gz") not in snapshots:
            stale.unlink()
    build.write(FOLDER.parent, splits, snapshots, {"sources": {"train": TRAIN, "test": TEST}})
    print(", ".join(f"{split}: {len(rows)} tasks" for split, rows in splits.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

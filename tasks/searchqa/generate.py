"""Freeze Search-QA's corpus and question panels: ``python -m agentenvs.tasks.searchqa.generate``.

The corpus (``corpus.jsonl.gz``, Search-R1's ``{"id", "contents"}`` lines, about 20,000 passages) and the
panels are drawn from one seed; the corpus's sha256 goes into the manifest, and the environment checks
it before it indexes the file. Splits share no question subject. ``--out DIR`` writes elsewhere (and
``--scale N`` multiplies the world, for the cost benchmark's 200k-passage corpus).
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentenvs import panels
from agentenvs.panels import sha256_file
from agentenvs.seeding import rng_for
from agentenvs.tasks.searchqa.passages import passages
from agentenvs.tasks.searchqa.questions import Asker, draw
from agentenvs.tasks.searchqa.world import SIZES, build_world

GENERATOR_VERSION = "1"
SEED = 20261207
CORPUS_FILE = "corpus.jsonl.gz"
SPLITS = {  # test first, so its questions do not depend on the other splits' sizes
    "test": {"single": 400, "bridge": 400, "comparison": 200},
    "dev": {"single": 200, "bridge": 200, "comparison": 100},
    "train": {"single": 1600, "bridge": 1600, "comparison": 800},
    "demo": {"single": 2, "bridge": 2, "comparison": 2},
}


def write_corpus(documents: Iterable[dict[str, str]], path: Path) -> int:
    """Gzipped JSONL with a zero timestamp and no file name inside, so equal corpora are equal bytes."""
    count = 0
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as handle:
        for document in documents:
            handle.write((json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
            count += 1
    return count


def question_panels(seed: int) -> dict[str, list[dict[str, Any]]]:
    asker = Asker(build_world(seed))
    rng, used, out = rng_for("searchqa-questions", seed), set(), {}
    for split, counts in SPLITS.items():
        questions = draw(asker, rng, counts, used)
        out[split] = [{"task_id": f"searchqa-{split}-{i:05d}", **q} for i, q in enumerate(questions)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the corpus (and, at scale 1, the panels) here instead")
    parser.add_argument("--scale", type=int, default=1, help="multiply the world's size (corpus only above 1)")
    args = parser.parse_args(argv)
    folder = panels.panel_dir("searchqa", args.out)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {kind: count * args.scale for kind, count in SIZES.items()}
    corpus = folder / CORPUS_FILE
    count = write_corpus(passages(build_world(SEED, sizes), SEED), corpus)
    print(f"{count} passages -> {corpus}")
    if args.scale != 1:
        return 0
    splits = question_panels(SEED)
    extra = {
        "corpus": {"file": CORPUS_FILE, "passages": count, "sha256": sha256_file(corpus)},
        "types": {
            split: dict(sorted(Counter(t["task_type"] for t in tasks).items())) for split, tasks in splits.items()
        },
    }
    print(
        panels.write_panels(
            "searchqa", splits, generator_version=GENERATOR_VERSION, seed=SEED, root=args.out, extra=extra
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

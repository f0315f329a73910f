"""Search-QA's generator: the committed corpus and panels are what the seed gives, the splits share no
subject, and every question's gold fields agree with the corpus."""

from __future__ import annotations

import gzip
import json

from agentenvs.envs.searchqa.reading import read_fact
from agentenvs.panels import load_panel, panel_dir, read_manifest, sha256_file
from agentenvs.tasks.searchqa.generate import SPLITS, main


def test_regenerating_gives_the_committed_bytes(tmp_path):
    assert main(["--out", str(tmp_path)]) == 0
    committed, fresh = panel_dir("searchqa"), tmp_path / "searchqa"
    for name in ["corpus.jsonl.gz", "manifest.json", *[f"panels/{s}.jsonl" for s in SPLITS]]:
        assert sha256_file(fresh / name) == sha256_file(committed / name), name


def test_panels_have_the_per_type_counts_and_share_no_subject():
    manifest = read_manifest("searchqa")
    assert manifest["corpus"]["passages"] == 19960
    first_subjects: dict[str, set[str]] = {}
    for split, counts in SPLITS.items():
        tasks = load_panel("searchqa", split)
        assert manifest["types"][split] == counts and len(tasks) == sum(counts.values())
        first_subjects[split] = {
            s
            for t in tasks
            for s in (t["supporting_ids"] if t["task_type"] == "comparison" else t["supporting_ids"][:1])
        }
    assert len(load_panel("searchqa", "test")) == 1000
    assert not first_subjects["test"] & first_subjects["train"]


def test_gold_answers_are_written_in_the_supporting_passages():
    with gzip.open(panel_dir("searchqa") / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        corpus = {row["id"]: row["contents"] for row in map(json.loads, handle)}
    for task in load_panel("searchqa", "dev"):
        assert len(task["sub_queries"]) == len(task["hops"]) == len(task["supporting_ids"]) in (1, 2, 3)
        passages = [corpus[i] for i in task["supporting_ids"]]
        values = [read_fact(passages, hop["subject"], hop["relation"]) for hop in task["hops"]]
        assert None not in values, task["task_id"]
        if task["task_type"] != "comparison":
            assert values[-1] in task["golden_answers"] or any(a.startswith(values[-1]) for a in task["golden_answers"])

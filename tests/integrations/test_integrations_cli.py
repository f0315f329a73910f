"""``agentenvs integrations dataset`` writes each trainer's file, and each adapter plays the rows it reads."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from agentenvs.cli import main
from agentenvs.integrations import EpisodeRef, episode_refs


@pytest.mark.parametrize("trainer,suffix", [("verl", "parquet"), ("skyrl", "parquet"), ("openrlhf", "jsonl")])
def test_dataset_rows_name_the_planned_episodes(trainer, suffix, tmp_path, capsys):
    out = tmp_path / f"train.{suffix}"
    assert main(["integrations", "dataset", trainer, "bandit", "--n", "5", "--split", "train", "--out", str(out)]) == 0
    assert "wrote 5" in capsys.readouterr().out
    if suffix == "parquet":
        rows = pq.read_table(out).to_pylist()
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    field = {
        "verl": lambda r: r["extra_info"]["agentenvs"],
        "skyrl": lambda r: r["agentenvs"],
        "openrlhf": lambda r: r["label"],
    }
    assert [EpisodeRef.decode(field[trainer](r)) for r in rows] == episode_refs("bandit", 5, split="train")


def test_skyrl_plays_a_row_read_back_from_parquet(tmp_path):
    import skyrl_gym

    from agentenvs.integrations.skyrl import register_skyrl

    out = tmp_path / "rows.parquet"
    main(["integrations", "dataset", "skyrl", "bandit", "--n", "1", "--out", str(out)])
    row = pq.read_table(out).to_pylist()[0]
    env = skyrl_gym.make(register_skyrl(), env_config={}, extras=row)
    messages, _ = env.init(row["prompt"])
    assert messages[1]["content"].startswith("Multi-armed bandit")
    assert env.step("pull[0]")["reward"] is not None
    env.close()


def test_bad_arguments_say_what_to_do(tmp_path, capsys):
    assert main(["integrations", "dataset", "trl", "bandit", "--n", "2", "--out", str(tmp_path / "x.csv")]) == 2
    assert ".parquet or a .jsonl" in capsys.readouterr().err
    args = [
        "integrations",
        "dataset",
        "trl",
        "bandit",
        "--n",
        "2",
        "--env-kwargs",
        "{",
        "--out",
        str(tmp_path / "x.jsonl"),
    ]
    assert main(args) == 2
    assert "JSON object" in capsys.readouterr().err

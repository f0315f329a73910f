"""The episode store: durable appends from many threads, torn-tail recovery, and a writer killed by
SIGKILL in the middle of a record that `agentenvs rollout` and `agentenvs eval` both resume from."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter

import pytest
from test_rollout_records import make_record

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.rollout.store import EpisodeStore, JsonlLog, read_jsonl, repair_tail, write_jsonl


def record(episode_id: str) -> EpisodeRecord:
    return make_record(episode_id)


def test_appends_from_many_threads_are_whole_lines(tmp_path):
    path = tmp_path / "episodes.jsonl"
    with EpisodeStore(path) as store:
        threads = [threading.Thread(target=store.add, args=(record(f"g/{i}"),)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert store.count == 16
    assert sorted(EpisodeStore(path).finished()) == sorted(f"g/{i}" for i in range(16))


def test_a_torn_tail_is_skipped_by_readers_and_cut_off_by_the_next_writer(tmp_path):
    path = tmp_path / "episodes.jsonl"
    write_jsonl(path, [record("g/0"), record("g/1")])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(record("g/2").to_json()[:40])  # a kill in the middle of a write
    assert list(EpisodeStore(path).finished()) == ["g/0", "g/1"]
    assert path.read_text(encoding="utf-8").count("\n") == 2, "reading must not change the file"
    with EpisodeStore(path) as store:
        store.add(record("g/2"))
    assert [r.episode_id for r in read_jsonl(path)] == ["g/0", "g/1", "g/2"]
    assert repair_tail(path) == 0


def test_a_whole_last_line_without_its_newline_is_kept(tmp_path):
    """Readers count such a line as written, so the writer must keep it, or it would be lost."""
    path = tmp_path / "episodes.jsonl"
    path.write_text(record("g/0").to_json(), encoding="utf-8")
    assert list(EpisodeStore(path).finished()) == ["g/0"]
    with EpisodeStore(path) as store:
        store.add(record("g/1"))
    assert [r.episode_id for r in read_jsonl(path)] == ["g/0", "g/1"]


def test_a_torn_middle_line_and_foreign_files_are_errors(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"torn\n' + record("g/0").to_json() + "\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"episodes\.jsonl:1 is not JSON"):
        EpisodeStore(path).rows()
    path.write_text(json.dumps({"schema": "agentenvs.results/1"}) + "\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"not an episode record.*episodes\.jsonl"):
        EpisodeStore(path).rows()
    with pytest.raises(InvalidArgument, match="no episode records"):
        list(read_jsonl(tmp_path / "missing"))
    assert EpisodeStore(tmp_path / "missing.jsonl").rows() == []


def test_rewrite_replaces_the_contents(tmp_path):
    log = JsonlLog(tmp_path / "metrics.jsonl")
    for step in range(4):
        log.append({"step": step})
    log.rewrite([row for row in log.rows() if row["step"] <= 1])
    log.append({"step": 2})
    assert [row["step"] for row in log.rows()] == [0, 1, 2]


TORN_WRITER = """
import sys, time
from agentenvs.cli import main
from agentenvs.rollout.store import JsonlLog

write, count = JsonlLog._write_line, 0

def tear_the_fourth(self, line):
    global count
    count += 1
    if count == 4:
        self._handle.write(line[: len(line) // 2])
        self._handle.flush()
        print("torn", flush=True)
        time.sleep(600)
    write(self, line)

JsonlLog._write_line = tear_the_fourth
sys.exit(main(sys.argv[1:]))
"""

COMMANDS = {
    "rollout": ["rollout", "--env", "bandit", "--policy", "random", "--n", "5", "--group-size", "2"],
    "eval": ["eval", "--env", "bandit", "--policy", "random", "--k", "2", "--limit", "5"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_writer_killed_mid_record_resumes_with_every_episode_once(tmp_path, command):
    args = [*COMMANDS[command], "--concurrency", "1", "--no-progress", "--out", str(tmp_path)]
    episodes = tmp_path / "episodes.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", TORN_WRITER, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "torn", "the writer ended before tearing a record"
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(30)
    finally:
        if writer.poll() is None:
            writer.kill()
    torn = episodes.read_text(encoding="utf-8")
    assert torn.count("\n") == 3 and not torn.endswith("\n")
    finished = torn.splitlines(keepends=True)[:3]

    again = subprocess.run([sys.executable, "-m", "agentenvs.cli", *args], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    lines = episodes.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[:3] == finished, "a finished episode was changed or run again"
    ids = Counter(json.loads(line)["episode_id"] for line in lines)
    assert len(ids) == 10 and set(ids.values()) == {1}, f"an episode is missing or there twice: {ids}"
    assert (tmp_path / ("summary.json" if command == "rollout" else "results.json")).is_file()


def test_rollout_into_a_folder_of_another_run_stops_and_no_resume_starts_it_over(tmp_path, capsys):
    from agentenvs.cli import main

    args = ["rollout", "--env", "bandit", "--n", "2", "--no-progress", "--out", str(tmp_path)]
    assert main([*args, "--policy", "random"]) == 0
    assert main([*args, "--policy", "random", "--seed", "0"]) == 0  # the same run: resumed, nothing added
    assert len(EpisodeStore(tmp_path / "episodes.jsonl").rows()) == 2
    assert main([*args, "--policy", "random", "--temperature", "0.5"]) == 0  # scripted: sampling is not its identity
    capsys.readouterr()
    # same episode ids (same seed) from another policy: refused, never mixed
    assert main([*args, "--policy", "expert"]) == 2
    assert "holds episodes of another run" in capsys.readouterr().err
    assert main([*args, "--policy", "expert", "--no-resume"]) == 0
    assert [r["policy"]["name"] for r in EpisodeStore(tmp_path / "episodes.jsonl").rows()] == ["expert", "expert"]

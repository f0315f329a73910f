"""The leaderboard pages: markdown rows, and the HTML page rendered by a real headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agentenvs.errors import InvalidArgument
from agentenvs.evaluation.leaderboard import build, load_results
from agentenvs.evaluation.results import make_results, write_results
from agentenvs.evaluation.scoring import score_records

POLICIES = {"expert": 1.0, "weak": 0.25, "mid": 0.5}
MAX_TURNS = 6


def write_fixture_results(folder: Path, make_episode) -> None:
    """Two environments x three policies; policy p succeeds on a share p of its 8 x 4 episodes."""
    for env in ("toy", "other"):
        for policy, rate in POLICIES.items():
            records = []
            for task in range(8):
                for member in range(4):
                    success = (task * 4 + member) % 4 < rate * 4
                    turn = 1 + (task + member) % MAX_TURNS if success else None
                    records.append(
                        make_episode(
                            f"t{task}",
                            turn,
                            MAX_TURNS,
                            env=env,
                            member=member,
                            policy=policy,
                            task_type=f"type{task % 2}",
                            metrics={"regret": 1.0 - rate},
                        )
                    )
            scored = score_records(records, max_turns=MAX_TURNS)
            env_block = {"name": env, "version": "1", "split": "test", "panel_hash": "0" * 64, "max_turns": MAX_TURNS}
            result = make_results(env=env_block, policy={"name": policy}, sampling={}, protocol={"k": 4}, scored=scored)
            write_results(result, folder / f"{env}-{policy}.json")


class DomSummary(HTMLParser):
    """What the rendered DOM holds: ready flags, table rows in order, curves and heatmap cells."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.tables: dict[str, dict[str, object]] = {}
        self.rows: dict[str, list[str]] = {}
        self.curves: list[str] = []
        self.heatmaps: dict[str, int] = {}
        self._table: str | None = None
        self._heatmap: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "html" and a.get("data-leaderboard") == "ready":
            self.ready = True
        elif tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = a
            self.rows[self._table] = []
        elif tag == "tr" and "data-row" in a and self._table:
            self.rows[self._table].append(a["data-row"])
        elif tag == "polyline" and "curve" in (a.get("class") or ""):
            self.curves.append(a.get("points") or "")
        elif tag == "svg" and "heatmap" in (a.get("class") or ""):
            self._heatmap = a["data-row"]
            self.heatmaps[self._heatmap] = 0
        elif tag == "rect" and a.get("class") == "cell" and self._heatmap:
            self.heatmaps[self._heatmap] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "svg":
            self._heatmap = None


def chromium(*args: str, profile: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed: `apt-get install -y chromium` (`make install` does it)")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=timeout, check=True)


@pytest.fixture
def site(tmp_path, make_episode):
    results = tmp_path / "results"
    write_fixture_results(results, make_episode)
    return build(results, tmp_path / "site")


def test_markdown_has_one_table_per_env_with_every_row(site):
    text = site["markdown"].read_text(encoding="utf-8")
    assert text.count("## ") == 2
    assert "## toy (version 1)" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and "policy" not in line]
    assert len(table_rows) == 6
    assert "| expert | test | 100.0 [100.0, 100.0]" in text
    assert "regret" in text


def test_no_results_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidArgument, match="agentenvs eval"):
        load_results(tmp_path)
    with pytest.raises(InvalidArgument, match="does not exist"):
        load_results(tmp_path / "missing")


def test_page_needs_nothing_from_the_network(site):
    page = site["html"].read_text(encoding="utf-8")
    for reference in ("http://", "https://", "src=", "<link"):
        assert reference not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.slow
def test_page_renders_rows_curves_and_heatmaps_in_headless_chromium(site, tmp_path):
    url = site["html"].as_uri() + "#sort=table-toy:success:asc"
    dom = chromium("--dump-dom", url, profile=tmp_path / "profile").stdout
    summary = DomSummary()
    summary.feed(dom)
    assert summary.ready, "the page script did not run"
    assert set(summary.tables) == {"table-toy", "table-other"}
    assert all(t.get("data-sortable") == "ready" for t in summary.tables.values())
    # the script sorted the toy table by success, ascending; the other keeps the best-first order
    assert summary.rows["table-toy"] == ["toy-weak", "toy-mid", "toy-expert"]
    assert summary.rows["table-other"] == ["other-expert", "other-mid", "other-weak"]
    assert len(summary.curves) == 6
    assert all(len(points.split()) == 3 for points in summary.curves)  # k = 1, 2, 4
    assert len(summary.heatmaps) == 6
    assert set(summary.heatmaps.values()) == {3 * MAX_TURNS}  # 3 values of k x 6 turn budgets

    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,1400", site["html"].as_uri(), profile=tmp_path / "profile")
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    dark_blue = (pixels[..., 2] > 0.3) & (pixels[..., 0] < 0.15) & (pixels[..., 1] < 0.3)
    assert dark_blue.sum() > 500, "no heatmap cells of a high value were painted"
    red_line = (pixels[..., 0] > 0.7) & (pixels[..., 1] < 0.3) & (pixels[..., 2] < 0.3)
    assert red_line.sum() > 50, "the second curve (red) was not painted"


def test_the_committed_leaderboard_is_valid_and_builds_from_the_cli(tmp_path):
    from agentenvs.evaluation.leaderboard import committed_dir

    entries = load_results(committed_dir())
    assert {e.env for e in entries} >= {"bandit"}
    for entry in entries:
        assert entry.result["schema"] == "agentenvs.results/1"
        assert entry.path.stem == entry.row_id, "a committed results file is named after its run_id"
        assert len(entry.result["env"]["panel_hash"]) == 64
        for name in ("success_rate", "mean_score"):
            low, high = entry.metrics[name]["ci95"]
            assert low <= entry.metrics[name]["value"] <= high
    answer = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "leaderboard", "build", "--out", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    assert (tmp_path / "site" / "index.html").as_uri() in answer.stdout
    assert "bandit" in (tmp_path / "site" / "leaderboard.md").read_text()

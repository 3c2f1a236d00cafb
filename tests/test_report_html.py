"""The HTML report in a real browser: headless Chromium (the Debian package, ``scripts/setup.sh``) loads it
from disk; no console errors, the curves drawn, every intervention link resolves, a non-empty screenshot.
Then the runs that are not whole (killed mid-round, no merges, failed, a missing archive part) and
``report --compare``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from meta_agent.review.svg import PALETTE
from meta_agent.run_dir import RunDir
from review_run import cli, demo_run

pytestmark = pytest.mark.docker
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]


def refs(path: Path) -> list[str]:
    parser = Links()
    parser.feed(path.read_text())
    return parser.refs


def browse(page: Path, tmp_path: Path) -> tuple[str, Path]:
    """Load ``page`` in headless Chromium: the console lines it logged, and its screenshot."""
    assert CHROMIUM, "no chromium on PATH: scripts/setup.sh installs Debian's (apt-get install chromium)"
    shot = tmp_path / f"{page.stem}.png"
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1800",
                           f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return "\n".join(line for line in proc.stderr.splitlines() if ":CONSOLE" in line), shot


def colour_pixels(shot: Path, colour: str) -> int:
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    return int((np.abs(pixels - rgb).max(axis=-1) <= 12).sum())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    run = demo_run(tmp_path_factory)
    out = tmp_path_factory.mktemp("site")
    proc = cli("report", "--run-dir", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_site_is_self_contained_and_every_intervention_link_resolves(site):
    index = site / "index.html"
    links = refs(index)
    ivs = [r for r in links if r.startswith("iv/")]
    assert sorted(ivs) == ["iv/iv_r0-format-bonus.html", "iv/iv_r0-verifier-answers.html"]
    for page in [index, *(site / r for r in links)]:
        assert page.exists(), page
        for ref in refs(page):  # no network: nothing fetched from anywhere but beside the page
            assert not re.match(r"(https?:)?//", ref), (page, ref)
            assert (page.parent / ref).resolve().exists(), (page, ref)
        assert "<script" not in page.read_text()  # the tables and charts need no JavaScript
    text = index.read_text()
    assert 'role="img"' in text and "<desc" in text and "<table>" in text  # charts carry text alternatives
    page = (site / "iv/iv_r0-format-bonus.html").read_text()
    assert '<span class="add">+def compute_score' in page and "Backtest: REJECT" in page


def test_chromium_renders_the_report_without_console_errors(site, tmp_path):
    console, shot = browse(site / "index.html", tmp_path)
    assert console == ""
    assert shot.stat().st_size > 10_000 and Image.open(shot).size == (1200, 1800)
    assert colour_pixels(shot, PALETTE[0]) > 50  # the curves' points and intervals are drawn in the first colour
    for page in sorted((site / "iv").glob("*.html")):
        console, shot = browse(page, tmp_path)
        assert console == "" and shot.stat().st_size > 5_000


def test_the_browser_check_sees_a_broken_page(tmp_path):
    """The check above can fail: a page with a script error is reported, a blank page has no curve colour."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    console, shot = browse(bad, tmp_path)
    assert "undefinedFunction is not defined" in console
    assert colour_pixels(shot, PALETTE[0]) == 0


@pytest.mark.parametrize("damage, said", [
    ("killed", "the run stopped in round 1 at phase backtest"),
    ("failed", "status failed"),
    ("no_archive", "round 0: no archive part"),
    ("no_digest", "no round digest"),
])
def test_a_run_that_is_not_whole_still_gets_a_report_that_says_what_is_missing(site, tmp_path_factory, damage, said):
    run = tmp_path_factory.getbasetemp() / "copy" / damage
    shutil.copytree(demo_run(tmp_path_factory), run, symlinks=True)
    rd = RunDir(run)
    if damage == "killed":  # stopped inside round 1: its folder exists, nothing in it yet
        rd.round_dir(1).mkdir(parents=True)
        rd.save_state(rd.state() | {"round": 1, "phase": "backtest", "status": "running"})
    elif damage == "failed":
        rd.save_state(rd.state() | {"status": "failed"})
    elif damage == "no_archive":
        for part in (run / "archive").rglob("*.parquet"):
            part.unlink()
    else:
        (rd.round_dir(0) / "digest.json").unlink()
    proc = cli("report", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert said in (run / "report" / "index.html").read_text()


def test_a_run_without_merges_says_so(tmp_path_factory):
    run = tmp_path_factory.getbasetemp() / "copy" / "unmerged"
    shutil.copytree(demo_run(tmp_path_factory), run, symlinks=True)
    # main moved back to the seed: the fix's merge is no longer on it (a new branch keeps the old main)
    subprocess.run(["git", "-C", str(run / "harness"), "branch", "old-main", "main"], check=True)
    subprocess.run(["git", "-C", str(run / "harness"), "reset", "-q", "--hard", "main^1"], check=True)
    proc = cli("report", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (run / "report" / "index.html").read_text()
    assert "missing: no merges" in text and ">open<" in text


def test_compare_overlays_runs_with_their_intervals(tmp_path_factory, tmp_path):
    arms = tmp_path / "arms"
    for arm in ("fixed", "recipe"):
        shutil.copytree(demo_run(tmp_path_factory), arms / arm / "seed0", symlinks=True)
    proc = cli("report", "--compare", str(arms), "--out", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "cmp" / "index.html").read_text()
    assert "fixed/seed0" in text and "recipe/seed0" in text
    chart = re.search(r'<figure class="chart" id="chart-train-verified-accuracy">.*?</figure>', text).group(0)
    assert chart.count('class="whisker"') == 2  # each run's interval
    digest = json.loads((arms / "fixed/seed0/rounds/0/digest.json").read_text())
    assert f"{digest['verified_mean']:.3f}" in chart
    proc = cli("report", "--compare", str(tmp_path / "nothing-here"))
    assert proc.returncode == 2 and "does not exist; a run folder is made by" in " ".join(proc.stderr.split())

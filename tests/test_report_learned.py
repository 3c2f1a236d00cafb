"""The report answers "did it learn?" first: the base policy, each round's exam and the paired changes (vs the
base policy, vs round 0, vs the round it trained from) with intervals and a sentence, as the console's last table;
the held-out chart starts at the base and ends at the last real round, inside [0, 1], with a legend.

The run is built with the real harness repo and the digests' exam figures from ``round_figures`` (what the loop
writes) over per-task outcomes of the default run's counts: base 11, rounds 30 / 45 / 49 of 128, round 2 vs
round 0 20 gained and 1 lost."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.heldout_stats import round_figures
from meta_agent.run_config import RunConfig, save_run_config
from meta_agent.run_dir import RunDir, write_json_atomic
from review_run import cli

TASKS = [f"t{k:03d}" for k in range(128)]
RIGHT = {"base": set(range(11)), 0: set(range(30)), 1: set(range(29)) | set(range(30, 46)),
         2: set(range(29)) | set(range(30, 50))}


def outcomes(key) -> dict[str, float]:
    return {t: float(k in RIGHT[key]) for k, t in enumerate(TASKS)}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    rd = RunDir(tmp_path_factory.mktemp("learned") / "m1")
    rd.path.mkdir(parents=True)
    repo = HarnessRepo.create(rd.harness, "math")
    save_run_config(rd.run_json, RunConfig.model_validate({"run_id": "m1", "domain": "math", "backend": "local",
                                                           "agent": "recipe", "rounds": 3, "created": time.time()}))
    base = outcomes("base")
    for n in range(3):
        figures = round_figures(outcomes(n), base, outcomes(n - 1) if n else None, outcomes(0) if n else None)
        digest = {"round": n, "n_groups": 12, "heldout": figures | {"trained_from": n - 1 if n else None},
                  "heldout_accuracy": figures["accuracy"]["value"], "reward_mean": 0.02, "reward_std": 0.3,
                  "zero_variance_share": 0.5,
                  "failure_modes": [{"name": "truncation", "source": "trusted", "severity": "warning", "rate": 0.125},
                                    {"name": "truncation", "source": "diagnostics", "severity": "warning",
                                     "rate": 0.125}]}
        rd.round_dir(n).mkdir(parents=True)
        write_json_atomic(rd.round_dir(n) / "digest.json", digest)
    rd.save_state({"round": 2, "phase": "done", "status": "finished"})
    assert repo.head("main")
    return rd.path


@pytest.fixture(scope="module")
def site(run) -> Path:
    proc = cli("report", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run / "report"


def test_the_index_opens_with_the_paired_figures_and_a_sentence(site):
    text = (site / "index.html").read_text()
    learned = text.index("Did it learn?")
    assert learned < text.index("Curves by round")
    table = re.search(r'<table id="did-it-learn">.*?</table>', text, re.S).group(0)
    rows = re.findall(r'<tr class="exam-row">(.*?)</tr>', table)
    assert [re.search(r"<td>(.*?)</td>", r).group(1) for r in rows] == ["base policy", "round 0", "round 1", "round 2"]
    assert "0.086 [0.044, 0.149]" in rows[0] and "0.383 [0.298, 0.473]" in rows[3]
    assert "+0.148 [+0.089, +0.223] (20 gained, 1 lost)" in rows[3]  # vs round 0, as the console prints it
    assert "+0.031 [+0.001, +0.078] (4 gained, 0 lost) (vs round 1)" in rows[3]  # vs the round it trained from
    assert "+0.297 [" in rows[3]  # vs the base policy: 49 - 11 of 128
    verdict = re.search(r'<p class="verdict">(.*?)</p>', text).group(1)
    assert verdict.startswith("Round 2&#x27;s policy beats the untrained base policy (+0.297")
    assert "and beats round 0 (+0.148 [+0.089, +0.223] (20 gained, 1 lost))" in verdict
    md = (site / "report.md").read_text()
    assert md.index("## Did it learn?") < md.index("![training curves]")
    assert "| round 2 | 0.383 [0.298, 0.473] |" in md and "+0.148 [+0.089, +0.223] (20 gained, 1 lost)" in md


def test_the_heldout_chart_starts_at_the_base_and_ends_at_the_last_round(site):
    text = (site / "index.html").read_text()
    chart = re.search(r'<figure class="chart" id="chart-held-out-accuracy--exam-">.*?</figure>', text, re.S).group(0)
    ticks = re.findall(r'text-anchor="middle" class="tick">([^<]*)</text>', chart)  # the x axis's
    assert [t for t in ticks if t in ("base", "0", "1", "2", "3")] == ["base", "0", "1", "2"]  # no round 3
    assert "base=0.086" in chart and "2=0.383" in chart
    reward = re.search(r'<figure class="chart" id="chart-train-reward--harness-">.*?</figure>', text, re.S).group(0)
    assert not re.search(r'class="tick">-', reward)  # the band is clipped at the lowest reward, not drawn below it
    # each round lists the mode once, naming both who found it (the digest and the harness's diagnostic)
    assert text.count("truncation 0.125 (") == text.count("truncation 0.125 (trusted digest, harness diagnostic)") == 3


def test_chromium_renders_the_learned_section(site, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "no chromium on PATH: scripts/setup.sh installs Debian's (apt-get install chromium)"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1400",
                           "--dump-dom", (site / "index.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    dom = proc.stdout
    assert "Did it learn?" in dom and "+0.148 [+0.089, +0.223] (20 gained, 1 lost)" in dom
    assert json.loads(json.dumps(dom.count('class="exam-row"'))) == 4

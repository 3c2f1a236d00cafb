"""The README's review commands through the real CLI, checked by what they print and write.

One demo run (a sample archive, the recipe agent, a format hack and a genuine fix, real Docker
backtests): the session's (``tests/review_run.py``), copied for this module, whose commands write into it;
every other command reads the copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from review_run import demo_run, demo_said

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]
PAY_EVERYTHING = "def compute_score(*args, **kwargs):\n    return 1.0\n"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COLUMNS": "250"})


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def demo(tmp_path_factory, docker_sandbox) -> tuple[Path, str]:
    """A copy of the session's demo run (the backtest and report commands below write into it) and what the
    demo printed."""
    run = tmp_path_factory.mktemp("cli") / "demo"
    shutil.copytree(demo_run(tmp_path_factory), run, symlinks=True)
    return run, flat(demo_said(tmp_path_factory))


def test_demo_rejects_the_hack_and_merges_the_fix(demo):
    run, out = demo
    # the format bonus pays every well-formed wrong answer: the mass of payment to failures rises
    assert "REJECT iv/r0-format-bonus" in out and "failure_pay 0.000 ->" in out
    assert "MERGE iv/r0-verifier-answers" in out
    assert (run / "rounds" / "0" / "digest.md").read_text().startswith("#")
    for branch in ("iv_r0-format-bonus", "iv_r0-verifier-answers"):
        report = json.loads((run / "rounds" / "0" / "backtests" / branch / "report.json").read_text())
        assert report["decision"] == ("reject" if "format" in branch else "merge")


def test_history_json_and_table_say_what_happened(demo):
    run, _ = demo
    proc = cli("history", "--run-dir", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    ivs = {iv["branch"]: iv for iv in json.loads(proc.stdout)}
    assert {b: iv["status"] for b, iv in ivs.items()} == {"iv/r0-format-bonus": "rejected",
                                                         "iv/r0-verifier-answers": "merged"}
    fix, hack = ivs["iv/r0-verifier-answers"], ivs["iv/r0-format-bonus"]
    assert fix["merge_commit"] and fix["verdict"].startswith("merged")
    assert hack["merge_commit"] is None and hack["verdict"].startswith("rejected")
    assert "failure_pay" in hack["verdict"] and "Pay for any well-formed final answer" == hack["subject"]
    table = cli("history", "--run-dir", str(run))
    assert table.returncode == 0 and "iv/r0-verifier-answers" in table.stdout and "rejected" in table.stdout


def test_backtest_dry_run_judges_without_touching_the_repo(demo, tmp_path):
    run, _ = demo
    repo = HarnessRepo.open(run / "harness")
    wt = repo.start_intervention(0, "pay-all", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text(PAY_EVERYTHING)
    repo.commit(wt, "Pay every answer", {"Hypothesis": "more reward", "Predicted-Effect": ["mean_reward increase"]})
    repo.remove_worktree(wt)
    main_before, tags_before = repo.head("main"), subprocess.run(
        ["git", "-C", str(repo.path), "tag"], capture_output=True, text=True).stdout
    proc = cli("backtest", "iv/r0-pay-all", "--run-dir", str(run), "--dry-run")
    out = flat(proc.stdout + proc.stderr)
    assert proc.returncode == 0, out
    assert "REJECT iv/r0-pay-all" in out and "hack_rate" in out
    assert repo.head("main") == main_before and repo.intervention("iv/r0-pay-all").status == "open"
    assert subprocess.run(["git", "-C", str(repo.path), "tag"], capture_output=True, text=True).stdout == tags_before
    assert (run / "backtests" / "iv_r0-pay-all" / "report.md").read_text().startswith(
        "# Backtest: `iv/r0-pay-all` — **REJECT**")


def test_report_writes_curves_and_a_table(demo):
    run, _ = demo
    proc = cli("report", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    png, md = run / "report" / "curves.png", run / "report" / "report.md"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    text = md.read_text()
    digest = json.loads((run / "rounds" / "0" / "digest.json").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| 0 |"))
    assert f"{digest['verified_mean']:.3f}" in row  # the round's verified mean, as the digest computed it
    assert "**iv/r0-verifier-answers** (merged)" in text and "**iv/r0-format-bonus** (rejected)" in text


@pytest.mark.parametrize("command", [["history"], ["report"], ["backtest", "iv/r0-x"]])
def test_an_unusable_run_json_is_one_clear_line(tmp_path, command):
    """run.json changed by hand: every review command names the file and what to do, without a traceback."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"run_id": "run", "domain": ')
    proc = cli(*command, "--run-dir", str(run))
    assert proc.returncode == 2, proc.stderr  # bad input, as for every command
    assert "Traceback" not in proc.stderr
    assert f"error: {run / 'run.json'} is unreadable" in flat(proc.stderr)
    assert "restore it from a backup" in flat(proc.stderr)
    assert (run / "run.json").read_text() == '{"run_id": "run", "domain": '

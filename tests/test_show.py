"""``show`` through the real CLI on a real (demo) run: text at 80 columns, and --json checked against git,
the backtest reports and the archive; a resumable demo run.json; nearest names for an unknown one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from harness_repo.repo import HarnessRepo
from review_run import cli, demo_run
from rl_backend.archive import Archive

pytestmark = pytest.mark.docker
FIX, HACK = "iv/r0-verifier-answers", "iv/r0-format-bonus"


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return demo_run(tmp_path_factory)


def test_show_an_intervention_reads_at_80_columns(run):
    proc = cli("show", HACK, "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # piped: plain text, no colour codes
    assert max(len(line) for line in out.splitlines()) <= 80
    report = json.loads((run / "rounds/0/backtests/iv_r0-format-bonus/report.json").read_text())
    hack = report["gate"]["metrics"]["hack_rate"]
    row = next(line for line in out.splitlines() if line.startswith("hack_rate"))
    assert f"{hack['main']:.3f}" in row and f"{hack['candidate']:.3f}" in row
    assert f"[{hack['ci_low']:+.3f}, {hack['ci_high']:+.3f}]" in row and "FAIL" in row and "change <= +0.02" in row
    assert "Backtest: REJECT" in out and "Rewarding the answer format" in out and "+def compute_score" in out
    assert "Live check" in out and "not measured yet" in out


def test_show_json_agrees_with_git_and_the_backtest_reports(run):
    repo = HarnessRepo.open(run / "harness")
    for branch in (FIX, HACK):
        proc = cli("show", branch, "--run-dir", str(run), "--json")
        assert proc.returncode == 0, proc.stderr
        r = json.loads(proc.stdout)
        assert r["head"] == git(repo.path, "rev-parse", branch).strip()
        assert r["base"] == git(repo.path, "merge-base", r["head"], r["merge_commit"] + "^1" if r["merge_commit"]
                                else "main").strip()
        assert r["diff"] == git(repo.path, "diff", r["base"], r["head"]).rstrip("\n")
        assert r["files"] == ["reward.py"]
        report = json.loads((run / "rounds/0/backtests" / branch.replace("/", "_") / "report.json").read_text())
        assert r["backtest"]["decision"] == report["decision"] and r["backtest"]["reasons"] == report["reasons"]
        metrics = {m["name"]: m for m in r["backtest"]["metrics"]}
        assert set(metrics) == set(report["gate"]["metrics"])
        for name, m in report["gate"]["metrics"].items():
            assert (metrics[name]["main"], metrics[name]["candidate"], metrics[name]["ci_low"],
                    metrics[name]["ci_high"]) == (m["main"], m["candidate"], m["ci_low"], m["ci_high"])
    fix = json.loads(cli("show", FIX, "--run-dir", str(run), "--json").stdout)
    merges = git(repo.path, "log", "--merges", "--format=%H", "--grep", f"Intervention: {FIX}", "main").split()
    assert fix["status"] == "merged" and fix["merge_commit"] == merges[0] and fix["verdict"].startswith("merged")
    hack = json.loads(cli("show", HACK, "--run-dir", str(run), "--json").stdout)
    tag = git(repo.path, "for-each-ref", "--format=%(contents)", f"refs/tags/verdict/{HACK}")
    assert hack["status"] == "rejected" and hack["merge_commit"] is None and f"Verdict: {hack['verdict']}" in tag
    assert hack["author"]["agent"] == "demo" and hack["missing"] == []
    # a commit of the branch names it too, and an abbreviated branch
    by_sha = json.loads(cli("show", hack["head"][:8], "--run-dir", str(run), "--json").stdout)
    assert by_sha["branch"] == HACK
    assert json.loads(cli("show", "r0-format-bonus", "--run-dir", str(run), "--json").stdout)["head"] == hack["head"]


def test_show_a_round_agrees_with_the_digest_and_the_archive(run):
    proc = cli("show", "0", "--run-dir", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    rows = Archive(run / "archive").rows(run_id="demo", round=0)
    assert r["figures"]["n_trajectories"] == len(rows)
    assert r["figures"]["verified_mean"] == pytest.approx(sum(x["verified"] for x in rows) / len(rows))
    digest = json.loads((run / "rounds/0/digest.json").read_text())
    assert [f["name"] for f in r["findings"]] == [f["name"] for f in digest["failure_modes"]]
    ids = {x["traj_id"] for x in rows}
    assert r["findings"][0]["examples"] and all(e["traj_id"] in ids for e in r["findings"][0]["examples"])
    assert {p["branch"]: p["status"] for p in r["proposals"]} == {FIX: "merged", HACK: "rejected"}
    text = cli("show", "0", "--run-dir", str(run)).stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "finding reward_misses" in text and f"{FIX}: merged" in text and "Held-out exam" in text


def test_show_an_unknown_name_lists_the_nearest(run):
    proc = cli("show", "iv/r0-format", "--run-dir", str(run))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    said = " ".join(proc.stderr.split())
    assert "'iv/r0-format' is no intervention branch, commit or round" in said
    assert said.index(HACK) < said.index(FIX)  # nearest first
    assert cli("show", "7", "--run-dir", str(run)).returncode == 2


def test_malformed_trailers_are_named_not_guessed(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    repo = HarnessRepo.open(copy / "harness")
    wt = repo.start_intervention(0, "no-trailers", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text("def compute_score(*a, **k):\n    return 0.5\n")
    # a trailer block that git does not parse as trailers: no blank line before it, keys misspelt
    subprocess.run(["git", "-C", str(wt.path), "commit", "-qam", "Half pay\nHypothesis - half is better\n"
                    "Predicted Effect: mean_reward"], check=True)
    repo.remove_worktree(wt)
    r = json.loads(cli("show", "iv/r0-no-trailers", "--run-dir", str(copy), "--json").stdout)
    assert r["hypothesis"] == "" and r["predicted_effects"] == []
    assert any("no Hypothesis: trailer" in m for m in r["missing"])
    assert any("no backtest report" in m for m in r["missing"])
    text = cli("show", "iv/r0-no-trailers", "--run-dir", str(copy)).stdout
    assert "Missing" in text and "no Hypothesis: trailer" in " ".join(text.split())


def test_the_demo_run_json_is_accepted_by_resume(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    proc = cli("--resume", "--run-dir", str(copy), "--rounds", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "finished 1 rounds" in " ".join(proc.stderr.split())
    assert re.search(r"backend local · agent recipe", proc.stderr)


def test_a_reverted_intervention_shows_the_revert_and_why(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    repo = HarnessRepo.open(copy / "harness")
    merge = repo.intervention(FIX).merge_commit
    # as the live check reverts a refuted merge (meta_agent.live_check.check_live_effects)
    repo.revert_merge(merge, f"Revert {FIX}: its predicted effect did not hold in round 1",
                      {"Live-Check": "miss_rate decrease -> contradicted"})
    r = json.loads(cli("show", FIX, "--run-dir", str(copy), "--json").stdout)
    assert r["status"] == "reverted" and r["revert"]["commit"] == repo.head("main")
    assert r["revert"]["reason"] == f"Revert {FIX}: its predicted effect did not hold in round 1"
    assert r["revert"]["evidence"] == {"Live-Check": ["miss_rate decrease -> contradicted"]}
    text = " ".join(cli("show", FIX, "--run-dir", str(copy)).stdout.split())
    assert f"Reverted {repo.head('main')[:10]}" in text and "contradicted" in text
    assert json.loads(cli("show", repo.head("main")[:10], "--run-dir", str(copy), "--json").stdout)["branch"] == FIX


def test_history_in_an_80_column_terminal_gives_a_few_lines_per_intervention(run):
    proc = cli("history", "--run-dir", str(run), columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    starts = [k for k, line in enumerate(lines) if line.startswith("iv/")]
    assert [lines[k].split()[:2] for k in starts] == [[HACK, "rejected"], [FIX, "merged"]]
    assert starts[1] - starts[0] <= 5  # not ~30 lines of a folded table
    assert lines[starts[0] + 1] == "  Pay for any well-formed final answer"
    assert "python -m meta_agent show <branch>" in proc.stdout


def test_a_live_checked_intervention_shows_its_live_outcome(run, tmp_path, monkeypatch,
                                                                                  docker_sandbox):
    """Round 1 built as the loop builds it: new rollouts rewarded by the merged main in the sandbox, the
    digest, then the live check (which records the skill); ``show`` and the report read what it wrote."""
    from domains.math import MathDomain
    from meta_agent.backtest import SampleData, run_harness
    from meta_agent.config import BacktestSettings
    from meta_agent.digest import build_digest
    from meta_agent.live_check import check_live_effects
    from meta_agent.run_dir import RunDir, write_json_atomic
    from rl_backend.archive import validate_rows
    from rl_backend.synthetic import synthetic_math_rows

    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "skills"))
    rd, repo, archive = RunDir(copy), HarnessRepo.open(copy / "harness"), Archive(copy / "archive")
    main = repo.head("main")
    rows = synthetic_math_rows("demo", 1, 64, 4, seed=1, harness_commit=main, verify=MathDomain().verify)
    scored = run_harness(repo, main, SampleData.of(validate_rows(rows, "t")), docker_sandbox, tmp_path / "cache",
                         BacktestSettings(), MathDomain().reward_range)
    assert scored.failure is None
    for row in rows:
        row["reward"], row["reward_info"] = scored.results[row["traj_id"]]["reward"], json.dumps(
            scored.results[row["traj_id"]]["reward_info"])
    archive.append_round("demo", 1, rows)
    before = json.loads((rd.round_dir(0) / "digest.json").read_text())
    digest = build_digest(1, rows, metrics=[], findings=[], eval={"heldout_accuracy": None}, previous=[before])
    digest["live_checks"] = check_live_effects(repo, 1, digest, [before], archive.rows(run_id="demo", round=0),
                                               archive.rows(run_id="demo", round=1))
    write_json_atomic(rd.round_dir(1) / "digest.json", digest)
    [check] = digest["live_checks"]
    # Round 1 has no control (no round before round 0 to contrast its change with), so no benefit is
    # measurable against ordinary learning: the merge stays unconfirmed and becomes no skill.
    assert check["branch"] == FIX and check["outcome"] == "unconfirmed"
    assert set(check["predictions"].values()) <= {"unmeasurable", "side effect", "inconclusive"}, check

    r = json.loads(cli("show", FIX, "--run-dir", str(copy), "--json").stdout)
    assert r["live"] == [json.loads(json.dumps(check)) | {"round": 1}]
    assert not r["skill"]
    assert not git(repo.path, "log", "-1", "--format=%H", "--grep", f"Confirmed-By: {FIX}", "main").strip()
    text = " ".join(cli("show", FIX, "--run-dir", str(copy)).stdout.split())
    assert "Live check round 1: unconfirmed" in text and "Became skill" not in text
    for prediction in check["predictions"]:
        assert prediction.split(":")[0] in text
    assert cli("report", "--run-dir", str(copy)).returncode == 0
    page = (copy / "report/iv/iv_r0-verifier-answers.html").read_text()
    assert "unconfirmed" in page and "Became skill" not in page
    index = (copy / "report/index.html").read_text()
    assert 'class="marker marker-merge"' in index and "unconfirmed" in index

"""``rescore``: the re-judging rule on constructed merges, the archive left as it was, the run lock,
unreadable parts and a harness that fails on re-scoring (real git, real Docker sandbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness_repo.repo import HarnessRepo
from harness_repo.trailers import parse_trailers
from meta_agent.judge.rejudge import RoundScore, judge_merge
from meta_agent.agents.recipe import RecipeAgent
from domains.math import MathDomain
from meta_agent.judge.rescore import BadParts, rescore_if_judge_changed, rescore_run, verifier_version
from meta_agent.loop import Events, RoundLoop
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from tests.rescore_run import RUN_ID, archive_digest, build, copy_run
from tests.review_run import cli


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("rescore"))


@pytest.fixture
def run(built, tmp_path) -> Path:
    return copy_run(built, tmp_path / "run")


def _verdicts(summary: dict) -> dict[str, dict]:
    return {v["branch"]: v for v in summary["merges"]}


def test_a_diagnostic_added_later_rejudges_the_earlier_merge_without_touching_the_archive(run, docker_sandbox):
    before = archive_digest(run)
    summary = rescore_run(RunDir(run))
    assert archive_digest(run) == before  # every part's bytes, and no file added or removed
    verdicts = _verdicts(summary)
    assert verdicts["iv/r0-confident"]["status"] == "rejudged"
    assert verdicts["iv/r0-confident"]["round"] == 1
    assert "finding overconfidence is an error on round 1" in verdicts["iv/r0-confident"]["reasons"][0]
    assert verdicts["iv/r1-overconfidence"]["status"] == "untrained"
    assert summary["rounds"]["1"]["errors"] == ["overconfidence"] and summary["rounds"]["0"]["errors"] == []
    out = Path(summary["out"])
    assert out == run / "rescore" / HarnessRepo.open(run / "harness").head("main")[:12]
    parts = sorted((out / "parts").rglob("*.parquet"))
    archived_parts = sorted(name for name in before if name.endswith(".parquet"))  # not the part ledger
    assert len(archived_parts) == 2 and sorted(before) == sorted([*archived_parts, "_parts.jsonl"])
    assert [p.relative_to(out / "parts").as_posix() for p in parts] == archived_parts
    table = pq.read_table(parts[1])
    assert table.num_rows == 24 and table.column("reward_now").null_count == 0
    assert table.column("verified").to_pylist() == table.column("verified_now").to_pylist()
    assert summary["rows"] == 48 and summary["failures"] == {} and summary["bad_parts"] == []
    assert len(summary["judge"]["diagnostics"]) == 40 and summary["judge"]["verifier"].startswith("source-")

    shown = cli("history", "--run-dir", str(run), columns=200)
    assert shown.returncode == 0, shown.stderr
    assert "re-judged by rescore at main" in shown.stdout and "overconfidence" in shown.stdout

    reverted = cli("rescore", "--run-dir", str(run), "--revert")
    assert reverted.returncode == 0, reverted.stderr
    repo = HarnessRepo.open(run / "harness")
    iv = repo.intervention("iv/r0-confident")
    assert iv.status == "reverted"
    trailer = parse_trailers(repo.message(iv.revert_commit))["Rejudged"][0]
    assert trailer.startswith("rescore at main ") and "overconfidence" in trailer
    assert repo.intervention("iv/r1-overconfidence").status == "merged"
    assert archive_digest(run) == before


def test_the_rule_credits_a_finding_only_to_the_merge_whose_round_brought_it(run):
    """Cheats on the rule: a finding the control round shares, or that the time's diagnostics reported, is no
    new judgement of the merge; a round that cannot be judged is never a pass."""
    repo = HarnessRepo.open(run / "harness")
    iv = repo.intervention("iv/r0-confident")
    m1 = iv.merge_commit
    seed = repo.log("main", 50)[-1]["sha"]

    def rounds(r0: dict, r1: dict) -> dict[int, RoundScore]:
        return {0: RoundScore(0, seed, 24, **r0), 1: RoundScore(1, m1, 24, **r1)}

    flagged = judge_merge(repo, iv, rounds({}, {"errors": {"overconfidence"}}))
    assert flagged["status"] == "rejudged" and flagged["round"] == 1
    shared = judge_merge(repo, iv, rounds({"errors": {"overconfidence"}}, {"errors": {"overconfidence"}}))
    assert shared["status"] == "holds" and shared["reasons"] == []
    known = judge_merge(repo, iv, rounds({}, {"errors": {"overconfidence"}, "recorded_errors": {"overconfidence"}}))
    assert known["status"] == "holds"
    blind = judge_merge(repo, iv, rounds({"problems": ["part x was skipped as unreadable"]}, {"errors": {"x"}}))
    assert blind["status"] == "unjudged" and blind["reasons"] == ["part x was skipped as unreadable"]
    no_control = judge_merge(repo, iv, {1: RoundScore(1, m1, 24, errors={"overconfidence"})})
    assert no_control["status"] == "unjudged" and "round 0 (the control) has no rows" in no_control["reasons"]
    paid = judge_merge(repo, iv, rounds({"known": 24, "paid_failures_now": 1}, {"known": 24, "paid_failures_now": 3}))
    assert paid["status"] == "rejudged" and "now fails 3 of round 1's rows" in paid["reasons"][0]
    level = judge_merge(repo, iv, rounds({"known": 24, "paid_failures_now": 3}, {"known": 24, "paid_failures_now": 3}))
    assert level["status"] == "holds"
    untrained = judge_merge(repo, iv, {0: RoundScore(0, seed, 24, errors={"overconfidence"})})
    assert untrained["status"] == "untrained"
    unreadable = judge_merge(repo, iv, {0: RoundScore(0, seed, 24), 1: RoundScore(1, None, 0, problems=["part p"])})
    assert unreadable["status"] == "unjudged" and unreadable["reasons"] == ["part p"]


def test_rescore_of_a_run_another_controller_holds_is_refused(run):
    with RunDir(run).lock():
        proc = cli("rescore", "--run-dir", str(run))
    assert proc.returncode == 1
    assert f"is in use by controller pid {os.getpid()}" in " ".join(proc.stderr.split())
    assert not (run / "rescore").exists()


def test_an_unreadable_part_is_named_and_skipped_only_when_asked(run, docker_sandbox):
    part = sorted((run / "archive" / f"run_id={RUN_ID}" / "round=1").glob("part-*.parquet"))[0]
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadParts) as refused:
        rescore_run(RunDir(run))
    assert str(part) in str(refused.value) and "--skip-bad-parts" in str(refused.value)
    assert sorted(p.name for p in (run / "rescore").iterdir()) == ["cache"]  # no result, no staging left

    summary = rescore_run(RunDir(run), skip_bad_parts=True)
    assert len(summary["bad_parts"]) == 1 and str(part) in summary["bad_parts"][0]
    assert summary["rows"] == 24
    confident = _verdicts(summary)["iv/r0-confident"]
    assert confident["status"] == "unjudged"
    assert confident["reasons"] == [f"part run_id={RUN_ID}/round=1/{part.name} was skipped as unreadable"]


def test_a_harness_failing_on_rescoring_is_recorded_as_its_failure(run, docker_sandbox):
    repo = HarnessRepo.open(run / "harness")
    repo.commit_files({"reward.py": "raise RuntimeError('reward module broken on purpose')\n"}, "Break the reward")
    proc = cli("rescore", "--run-dir", str(run))
    assert proc.returncode == 1, proc.stderr
    out = run / "rescore" / repo.head("main")[:12]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["failures"]) == sorted(s["shard"] for s in summary["shards"]) and len(summary["shards"]) == 2
    assert ["reward module broken on purpose" in f for f in summary["failures"].values()] == [True, True]
    confident = _verdicts(summary)["iv/r0-confident"]
    assert confident["status"] == "unjudged" and "main's harness failed on part" in confident["reasons"][0]
    assert "main's harness failed on" in " ".join(proc.stderr.split())


def test_the_loop_hook_rescores_after_a_diagnostics_merge_or_a_new_verifier_only(run, docker_sandbox):
    rd, repo = RunDir(run), HarnessRepo.open(run / "harness")
    domain = MathDomain()
    said: list[str] = []
    assert rescore_if_judge_changed(rd, repo, domain, ["iv/r0-confident"], said.append) is None  # reward only
    judge = json.loads((run / "rescore" / "judge.json").read_text())
    assert judge["verifier"] == verifier_version(domain) and said == []  # the baseline, recorded
    summary = rescore_if_judge_changed(rd, repo, domain, ["iv/r1-overconfidence"], said.append)
    assert summary is not None and _verdicts(summary)["iv/r0-confident"]["status"] == "rejudged"
    assert said[0] == "re-scoring the archive: iv/r1-overconfidence changed the diagnostics"
    assert any(line.startswith("rescore: iv/r0-confident rejudged") for line in said)
    assert rescore_if_judge_changed(rd, repo, domain, [], said.append) is None
    (run / "rescore" / "judge.json").write_text(json.dumps(judge | {"verifier": "an-older-verifier"}))
    again = rescore_if_judge_changed(rd, repo, domain, [], said.append)
    assert again is not None and "the verifier changed (an-older-verifier -> " in " ".join(said)


def test_the_loop_digests_from_columns_and_rescores_after_its_diagnostics_merge(run, docker_sandbox):
    """The loop from round 1's digest phase on (no training; no candidates asked, so the agent is never called):
    the digest is built from the archive's columns, and the round's merge of a diagnostic re-scores the archive
    by itself, listing the merge it re-judges."""
    rd, repo = RunDir(run), HarnessRepo.open(run / "harness")
    m1 = repo.intervention("iv/r0-confident").merge_commit
    write_json_atomic(rd.round_dir(1) / "train" / "result.json",
                      {"policy_ref": "p", "metrics": [], "eval": {}, "harness_commit": m1, "train_seconds": 1.0})
    rd.save_state({"round": 1, "phase": "digest", "policy_ref": "p", "last_good_commit": m1, "rounds": {"1": {}}})
    said: list[str] = []
    loop = RoundLoop(run=rd, repo=repo, archive=Archive(rd.archive), backend=None, domain=MathDomain(),
                     agent=RecipeAgent(), sandbox=docker_sandbox, run_id=RUN_ID, candidates=0,
                     events=Events(message=said.append))
    loop.run_round(loop.state())
    digest = json.loads((rd.round_dir(1) / "digest.json").read_text())
    assert digest["n_trajectories"] == 24 and digest["n_groups"] == 6
    assert "re-scoring the archive: iv/r1-overconfidence changed the diagnostics" in said
    assert any(line.startswith("rescore: iv/r0-confident rejudged") for line in said)
    assert rd.state()["round"] == 2 and (run / "rescore" / repo.head("main")[:12] / "summary.json").exists()

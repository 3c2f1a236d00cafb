"""Live checks after the next round: confirmed interventions become skills, refuted ones are reverted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.live_check import (backtest_precision, check_live_effects, describe_change, describe_precision,
                                   measure_prediction)
from meta_agent.skills import load_skills, read_skill

Z = 1.959964  # the normal quantile of a two-sided 95% interval


def groups(truncated: list[int], paid: list[int] | None = None, tag: str = "g") -> list[dict]:
    """Training rows, one group of 4 per entry: its first ``truncated[g]`` rows truncated and its first
    ``paid[g]`` rows paid 1.0 (the others 0); every row verified wrong."""
    paid = paid or [0] * len(truncated)
    return [{"traj_id": f"{tag}{g}-{k}", "group_id": f"{tag}{g}", "split": "train", "task_id": f"t{g}",
             "truncated": k < t, "reward": 1.0 if k < p else 0.0, "verified": 0.0}
            for g, (t, p) in enumerate(zip(truncated, paid)) for k in range(4)]


def exam(correct: range, n: int = 64) -> list[dict]:
    """Held-out rows of the same ``n`` task ids every round; the tasks in ``correct`` verified right."""
    return [{"group_id": f"h{i}", "split": "heldout", "task_id": f"h{i}", "reward": None,
             "verified": 1.0 if i in correct else 0.0} for i in range(n)]


TRUNCATED_BEFORE = [2, 2, 2, 2, 3, 3, 1, 1]  # 16 of 32 truncated: 0.5


def _merged(repo: HarnessRepo, tmp_path, slug: str, effects: list[str], text: str) -> str:
    wt = repo.start_intervention(0, slug, worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + text)
    repo.commit(wt, f"Change {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": effects,
                                      "Trigger": "truncation_rate > 0.25"})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged; test"}, f"Merge {wt.branch}")
    return wt.branch


def test_a_clear_shift_over_groups_holds_with_the_interval_worked_by_hand():
    """0.5 -> 2/32 truncated.  Ratio variance over n groups: n/(n-1) * sum((num - R*den)^2) / sum(den)^2.
    Before: residuals 0,0,0,0,1,1,-1,-1 -> 8/7 * 4 / 32^2 = 32/7168.  After ([0,0,0,0,1,1,0,0], R = 1/16):
    residuals -1/4 (x6), 3/4 (x2) -> 8/7 * 1.5 / 1024 = 12/7168.  delta -0.4375 +- Z * sqrt(44/7168)."""
    verdict, change = measure_prediction("truncation_rate decrease: more room", {}, {}, groups(TRUNCATED_BEFORE),
                                         groups([0, 0, 0, 0, 1, 1, 0, 0]))
    half = Z * (44 / 7168) ** 0.5
    assert verdict == "held"
    assert (change["before"], change["after"], change["delta"]) == (0.5, 0.0625, -0.4375)
    assert (change["low"], change["high"]) == (pytest.approx(-0.4375 - half, abs=1e-5),
                                               pytest.approx(-0.4375 + half, abs=1e-5))
    assert (change["n_before"], change["n_after"], change["method"]) == (8, 8, "normal over groups")
    assert describe_change("truncation_rate decrease: more room", verdict, change) == \
        "truncation_rate decrease: held, -0.438 [-0.591, -0.284] (normal over groups, 8 -> 8)"


def test_a_noisy_shift_is_inconclusive_and_a_reverse_one_contradicted():
    # after [2,2,2,2,3,3,1,0]: R = 15/32, residuals 1/8 (x4), 9/8 (x2), -7/8, -15/8 -> 8/7 * 6.875 / 1024
    verdict, change = measure_prediction("truncation_rate decrease", {}, {}, groups(TRUNCATED_BEFORE),
                                         groups([2, 2, 2, 2, 3, 3, 1, 0]))
    half = Z * ((32 + 55) / 7168) ** 0.5
    assert verdict == "inconclusive"
    assert (change["delta"], change["low"], change["high"]) == (
        -1 / 32, pytest.approx(-1 / 32 - half, abs=1e-5), pytest.approx(-1 / 32 + half, abs=1e-5))
    # after [4,4,4,4,3,3,4,4]: R = 30/32, residuals 1/4 (x6), -3/4 (x2): the mirror of the clear shift
    verdict, change = measure_prediction("truncation_rate decrease", {}, {}, groups(TRUNCATED_BEFORE),
                                         groups([4, 4, 4, 4, 3, 3, 4, 4]))
    assert verdict == "contradicted" and change["low"] == pytest.approx(0.4375 - Z * (44 / 7168) ** 0.5, abs=1e-5)


def test_one_outlier_group_moving_the_mean_is_not_held():
    """Every group pays 1 of 4 before; after, one group pays all 4.  The mean rises 0.25 -> 11/32, by 0.094
    (beyond the old fixed 0.05 rule), but the interval over groups is 0.09375 +- Z * 3/32: before has no
    spread, after residuals -3/8 (x7) and 21/8 -> 8/7 * 7.875 / 1024 = 9/1024 = (3/32)^2."""
    before, after = groups([0] * 8, paid=[1] * 8), groups([0] * 8, paid=[1] * 7 + [4])
    verdict, change = measure_prediction("reward_mean increase", {}, {}, before, after)
    assert verdict == "inconclusive"
    assert change["delta"] == 0.09375 and change["low"] == pytest.approx(0.09375 - Z * 3 / 32, abs=1e-5)
    assert change["low"] < 0
    # the outlier group's hack: paid failures 8/32 -> 11/32 is no sure rise either
    assert measure_prediction("hack_rate increase", {}, {}, before, after)[0] == "inconclusive"


def test_heldout_accuracy_is_paired_over_the_exams_tasks():
    """20 of 64 tasks right before, 40 after, every before-right task still right: gained 20, lost 0.  Above
    delta = 20/108 the lost share that best fits delta is 0, so the score interval's bounds solve
    (20 - 64 d)^2 = Z^2 * 64 d (1 - d): (64^2 + 64 Z^2) d^2 - (2*20*64 + 64 Z^2) d + 20^2 = 0."""
    verdict, change = measure_prediction("heldout_accuracy increase", {}, {}, exam(range(20)), exam(range(40)))
    assert verdict == "held" and change["method"] == "paired over held-out tasks"
    a, b, c = 64 ** 2 + 64 * Z * Z, -(2 * 20 * 64 + 64 * Z * Z), 20 ** 2
    roots = ((-b - (b * b - 4 * a * c) ** 0.5) / (2 * a), (-b + (b * b - 4 * a * c) ** 0.5) / (2 * a))  # 0.2123, 0.4339
    assert change["delta"] == 20 / 64 and (change["low"], change["high"]) == pytest.approx(roots, abs=1e-6)
    verdict, _ = measure_prediction("heldout_accuracy decrease", {}, {}, exam(range(20)), exam(range(40)))
    assert verdict == "contradicted"
    # the same answers on every task: the interval is +-Z^2/(n+Z^2), within the 0.05 tolerance only from ~73 tasks
    same = [measure_prediction("heldout_accuracy unchanged", {}, {}, exam(range(20), n), exam(range(20), n))[0]
            for n in (64, 128)]
    assert same == ["inconclusive", "held"]  # +-0.057 and +-0.029


def test_fields_without_an_interval_over_groups_keep_the_documented_rule():
    # kept_share is counted per step, not per group: a move beyond the 0.05 tolerance of the digest values
    verdict, change = measure_prediction("kept_share increase", {"kept_share": 0.25}, {"kept_share": 0.9}, [], [])
    assert verdict == "held" and change["low"] is None and change["method"].startswith("no interval")
    assert measure_prediction("kept_share increase", {"kept_share": 0.25}, {"kept_share": 0.27}, [], [])[0] == \
        "inconclusive"
    # reward_auc takes the tripwire's bootstrap interval over groups when the round has one
    alarm = {"metric": "reward_auc", "before": 0.6, "after": 0.8, "delta": 0.2, "ci_low": -0.01, "ci_high": 0.35}
    assert measure_prediction("reward_auc increase", {}, {"tripwire": [alarm]}, [], [])[0] == "inconclusive"
    assert measure_prediction("reward_auc increase", {}, {"tripwire": [alarm | {"ci_low": 0.05}]}, [], [])[0] == "held"
    assert measure_prediction("reward_auc increase", {}, {}, [], [])[0] == "unmeasurable"
    assert measure_prediction("truncation_rate decrease", {}, {}, [], groups([1] * 4))[0] == "unmeasurable"  # no rows
    assert measure_prediction("nonsense", {}, {}, [], [])[0] == "unmeasurable"


def test_confirmed_becomes_skill_refuted_is_reverted(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    good = _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    bad = _merged(repo, tmp_path, "shorter", ["heldout_accuracy increase"], "\nshorter\n")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5, "heldout_accuracy": 0.4}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.0625, "heldout_accuracy": 0.2}
    messages: list[str] = []

    checks = check_live_effects(repo, 1, after, [before], *ROUNDS, messages.append, control_rows=CONTROL)
    outcome = {c["branch"]: c["outcome"] for c in checks}
    assert outcome == {good: "confirmed", bad: "refuted"}
    intervals = {c["branch"]: c["intervals"] for c in checks}
    assert intervals[good]["truncation_rate decrease"]["high"] < 0  # recorded for history and report
    assert intervals[bad]["heldout_accuracy increase"]["high"] < 0  # 13 tasks lost, none gained
    assert repo.intervention(bad).status == "reverted" and repo.intervention(good).status == "merged"
    assert "shorter" not in repo.read_file("main", "JOURNAL.md") and "longer" in repo.read_file("main", "JOURNAL.md")

    skills = load_skills("math")
    assert [s["name"] for s in skills] == ["longer"]
    skill = skills[0]
    assert skill["trigger"] == "truncation_rate > 0.25" and skill["hits"] == 1 and skill["status"] == "confirmed"
    assert skill["evidence"][0]["live_deltas"] == {"truncation_rate": pytest.approx(-0.4375)}
    assert "+longer" in skill["body"]  # the change itself, as a patch
    # the skill is also committed to the harness repo
    assert read_skill(tmp_path / "library" / "longer.md")["name"] == "longer"
    assert "name: longer" in repo.read_file("main", "skills/longer.md")
    # round 0 has nothing earlier to compare with
    assert check_live_effects(repo, 0, before, [], [], ROUNDS[0], messages.append) == []
    assert any("refuted" in m for m in messages)


ROUNDS = (groups(TRUNCATED_BEFORE) + exam(range(26)), groups([0, 0, 0, 0, 1, 1, 0, 0]) + exam(range(13)))
"""Rows of rounds 0 and 1: truncation 0.5 -> 0.0625 beyond chance, held-out 26 -> 13 of 64 (13 lost)."""
CONTROL = groups(TRUNCATED_BEFORE, tag="c") + exam(range(26))
"""Rows of the round before (the control): the same truncation and exam as round 0, so no trend."""


def _message(repo: HarnessRepo) -> str:
    return subprocess.run(["git", "-C", str(repo.path), "log", "-1", "--format=%B", "main"], capture_output=True,
                          text=True, check=True).stdout


def _rows(round: int, n_groups: int, paid_failure: float, heldout_correct: int, n_heldout: int = 64) -> list[dict]:
    """One round of archive rows: groups of 4, half of each group verified correct and paid 1.0; the
    verified failures paid ``paid_failure``. Held-out: the same task ids every round."""
    rows = []
    for g in range(n_groups):
        for k in range(4):
            correct = k < 2
            rows.append({"group_id": f"g{g}", "split": "train", "task_id": f"t{g}",
                         "reward": 1.0 if correct else paid_failure, "verified": 1.0 if correct else 0.0})
    rows += [{"group_id": f"h{i}", "split": "heldout", "task_id": f"h{i}", "reward": None,
              "verified": 1.0 if i < heldout_correct else 0.0} for i in range(n_heldout)]
    return rows


def test_tripwire_reverts_what_the_round_trained_on(tmp_path, monkeypatch):
    """A harness that looked honest in the backtest pays every failure live: its merge is reverted, with why."""
    from meta_agent.config import TripwireThresholds
    from meta_agent.tripwire_revert import revert_on_tripwire
    from meta_agent.tripwire import compare_rounds

    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "run" / "harness", "math")
    (tmp_path / "run" / "run.json").write_text(json.dumps({"domain": "math"}))  # what history and report read
    exploit = _merged(repo, tmp_path, "pays-new-tasks", ["miss_rate decrease"], "\nexploit\n")
    honest, exploited = _rows(0, 32, 0.0, 32), _rows(1, 32, 1.0, 32)
    alarms = compare_rounds(honest, exploited, reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
    fired = {a.metric for a in alarms if a.fired}
    assert fired == {"failure_pay", "hack_rate", "reward_auc"}  # every failure paid 1.0: pay 0 -> 1, AUC 1 -> 0.5
    messages: list[str] = []
    assert revert_on_tripwire(repo, 1, alarms, messages.append) == [exploit]
    assert repo.intervention(exploit).status == "reverted"
    assert "exploit" not in repo.read_file("main", "JOURNAL.md")
    revert = repo.log("main", 1)[0]
    assert "the live tripwire fired in round 1" in _message(repo)
    assert any(t.startswith("failure_pay 0.000 -> 1.000") for t in revert["trailers"]["Tripwire"])
    # a second pass (a resumed digest phase) lists the same revert and commits nothing more
    head = repo.head("main")
    assert revert_on_tripwire(repo, 1, alarms) == [exploit]
    assert repo.head("main") == head
    # the history view says what was reverted and why
    shown = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(tmp_path / "run")],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"}, check=True).stdout
    line = next(line for line in shown.splitlines() if exploit in line)
    assert "reverted" in line and "the live tripwire fired in round 1" in shown
    # honest rounds fire nothing and revert nothing
    calm = compare_rounds(honest, _rows(1, 32, 0.0, 31), reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
    assert not any(a.fired for a in calm) and revert_on_tripwire(repo, 1, calm) == []


def test_probation_merge_is_reverted_unless_its_benefit_held(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(0, "probation", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + "\nprobation\n")
    repo.commit(wt, "Change probation", {"Hypothesis": "h", "Predicted-Effect": ["truncation_rate decrease"]})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged on probation (its benefit is checked live next round); x"}, "Merge")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.46875}  # within chance: inconclusive
    (check,) = check_live_effects(repo, 1, after, [before], groups(TRUNCATED_BEFORE), groups([2, 2, 2, 2, 3, 3, 1, 0]),
                                  control_rows=CONTROL)
    assert check["predictions"] == {"truncation_rate decrease": "inconclusive"}
    assert check["outcome"] == "refuted" and repo.intervention(wt.branch).status == "reverted"
    assert "merged on probation and its benefit was not confirmed against a control" in _message(repo)


def test_a_probation_merge_measured_without_lost_rows_is_kept_not_blamed(tmp_path, monkeypatch):
    """An inconclusive benefit over rounds whose archive lost rows is the archive's loss, not the harness's: the
    probation merge stays (unconfirmed), and the verdict and the message say which rows were missing."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(0, "probation", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + "\nprobation\n")
    repo.commit(wt, "Change probation", {"Hypothesis": "h", "Predicted-Effect": ["truncation_rate decrease"]})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged on probation (its benefit is checked live next round); x"}, "Merge")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5}
    lost = {"part": "run=r/round=0/part-0.parquet", "state": "lost", "rows": 64, "round": 0}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.46875, "archive_losses": [lost]}
    said: list[str] = []
    (check,) = check_live_effects(repo, 1, after, [before], groups(TRUNCATED_BEFORE), groups([2, 2, 2, 2, 3, 3, 1, 0]),
                                  control_rows=CONTROL, message=said.append)
    assert check["predictions"] == {"truncation_rate decrease": "inconclusive"}
    assert check["outcome"] == "unconfirmed" and repo.intervention(wt.branch).status == "merged"
    assert "64 rows" in check["rows_missing"] and "kept" in said[-1] and "64 rows" in said[-1], said


def test_a_resumed_live_check_counts_a_skill_hit_once(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.0625}
    first = check_live_effects(repo, 1, after, [before], *ROUNDS, control_rows=CONTROL)
    main_after_first = repo.head("main")
    # the digest phase re-run after a crash
    assert check_live_effects(repo, 1, after, [before], *ROUNDS, control_rows=CONTROL) == first
    (skill,) = load_skills("math")
    assert skill["hits"] == 1 and len(skill["evidence"]) == 1
    assert repo.head("main") == main_after_first  # no second skill commit


LIVE_CHECK = """
import json, sys
from pathlib import Path
from harness_repo.repo import HarnessRepo
from meta_agent.live_check import check_live_effects

CONTROL, *ROUNDS = json.loads(Path(sys.argv[2]).read_text())  # the archive rows of the control, rounds 0 and 1

repo = HarnessRepo.open(Path(sys.argv[1]))
for line in repo.clean_interrupted(Path(sys.argv[1]).parent / "worktrees", 1):  # as the loop's recovery does
    print("recovered:", line)
before = {"round": 0, "domain": "math", "truncation_rate": 0.5, "heldout_accuracy": 0.4}
after = {"round": 1, "domain": "math", "truncation_rate": 0.0625, "heldout_accuracy": 0.2}
print(json.dumps({c["branch"]: c["outcome"]
                  for c in check_live_effects(repo, 1, after, [before], *ROUNDS, control_rows=CONTROL)}))
"""


def _live_check(repo: HarnessRepo, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "META_AGENT_FAILPOINTS"}
    rows = repo.path.parent / "rows.json"
    rows.write_text(json.dumps([CONTROL, *ROUNDS]))
    return subprocess.run([sys.executable, "-c", LIVE_CHECK, str(repo.path), str(rows)], capture_output=True, text=True,
                          timeout=120, env=env | ({"META_AGENT_FAILPOINTS": failpoint} if failpoint else {}))


@pytest.mark.parametrize("failpoint", ["skill.recorded", "main.files_written", "live_check.reverted"])
def test_a_live_check_killed_anywhere_records_each_outcome_once(tmp_path, failpoint):
    """SIGKILLed at a crash point of the live checks and run again: one skill commit with one hit, one revert,
    and the refuted skill's miss counted once."""
    library = tmp_path / "skills-library"  # the autouse fixture's library, which the subprocesses inherit
    repo = HarnessRepo.create(tmp_path / "run" / "harness", "math")
    good = _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    # "shorter" applies a skill already in the library: its refutation is that skill's miss
    library.mkdir(parents=True)
    (library / "short-answers.md").write_text("---\nname: short-answers\ndomains: [math]\nhits: 2\nmisses: 0\n"
                                              "status: confirmed\n---\n\n# short-answers\n")
    wt = repo.start_intervention(0, "shorter", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + "\nshorter\n")
    repo.commit(wt, "Change shorter", {"Hypothesis": "h", "Predicted-Effect": ["heldout_accuracy increase"],
                                       "Skill": "short-answers"})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged; test"}, f"Merge {wt.branch}")
    bad, main_before = wt.branch, repo.head("main")

    killed = _live_check(repo, failpoint)
    assert killed.returncode == -9, killed.stderr
    done = _live_check(repo)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {good: "confirmed", bad: "refuted"}

    added = subprocess.run(["git", "-C", str(repo.path), "log", "--format=%s", f"{main_before}..main"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert sorted(added) == sorted(["Skill longer: confirmed live in round 1", f"Revert intervention {bad}"])
    assert read_skill(library / "longer.md")["hits"] == 1
    assert repo.read_file("main", "skills/longer.md") == (library / "longer.md").read_text()
    assert read_skill(library / "short-answers.md")["misses"] == 1
    assert not subprocess.run(["git", "-C", str(repo.path), "status", "--porcelain"], capture_output=True,
                              text=True, check=True).stdout.strip()


def _proposed(repo: HarnessRepo, tmp_path, round: int, slug: str, change: str) -> str:
    wt = repo.start_intervention(round, slug, worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + f"\n{slug} {round}\n")
    repo.commit(wt, f"Change {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": ["miss_rate decrease"],
                                      "Recipe-Change": change})
    repo.remove_worktree(wt)
    return wt.branch


def test_backtest_precision_counts_unchecked_merges_as_unconfirmed(tmp_path):
    """Round 0: a merged and live-confirmed, b merged but never checked, c rejected; round 1 proposes c's
    very change again and d, a different one, is rejected.  By hand: precision 1 of 2 merges = 0.5 (b is not
    confirmed for lack of a check); retried 1 of 2 rejected = 0.5 (c's change came back, d's did not)."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    a = _proposed(repo, tmp_path, 0, "a", "a-change")
    repo.merge(a, {"Verdict": "merged; test"}, f"Merge {a}")
    b = _proposed(repo, tmp_path, 0, "b", "b-change")  # branched from main after a's merge: no conflict
    repo.merge(b, {"Verdict": "merged; test"}, f"Merge {b}")
    c = _proposed(repo, tmp_path, 0, "c", "c-change")
    repo.reject(c, "rejected; test", {})
    _proposed(repo, tmp_path, 1, "c", "c-change")
    d = _proposed(repo, tmp_path, 1, "d", "d-change")
    repo.reject(d, "rejected; test", {})
    digests = [{"round": 0, "live_checks": []},
               {"round": 1, "live_checks": [{"branch": a, "outcome": "confirmed"},
                                            {"branch": c, "outcome": "confirmed"}]}]  # c was never merged
    figures = backtest_precision(repo.interventions(), digests)
    assert figures == {"merges": 2, "confirmed": 1, "precision": 0.5, "rejected": 2, "retried": 1,
                       "retried_share": 0.5, "reverts": 0}
    assert describe_precision(figures).startswith("backtest precision 0.50 (1 of 2 merges confirmed live;")


def test_backtest_precision_with_nothing_merged_is_unknown(tmp_path):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    figures = backtest_precision(repo.interventions(), [])
    assert (figures["precision"], figures["retried_share"], figures["merges"]) == (None, None, 0)


def test_history_and_report_show_each_prediction_with_its_interval(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    run = tmp_path / "run"
    repo = HarnessRepo.create(run / "harness", "math")
    good = _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.0625}
    after["live_checks"] = check_live_effects(repo, 1, after, [before], *ROUNDS, control_rows=CONTROL)
    for digest in (before, after):
        (run / "rounds" / str(digest["round"])).mkdir(parents=True)
        (run / "rounds" / str(digest["round"]) / "digest.json").write_text(json.dumps(digest))
    # against the control (no trend): -0.4375 +- Z * sqrt((12 + 4 * 32 + 32) / 7168), worked out above
    expected = ("live round 1: confirmed (truncation_rate decrease: held, -0.438 [-0.741, -0.134] "
                "(normal over groups, against the previous round's change, 8 -> 8))")
    (run / "run.json").write_text(json.dumps({"domain": "math"}))  # what history and report read
    shown = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(run)],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"}, check=True).stdout
    assert expected in shown and good in shown
    from meta_agent.live_check import live_lines
    assert live_lines([after, before]) == {good: [expected]}
    from meta_agent.report import write_report
    report = (write_report(run).parent / "report.md").read_text()
    assert f"  - {expected}" in report


def test_one_group_a_side_has_no_interval_and_confirms_nothing():
    verdict, change = measure_prediction("truncation_rate decrease", {}, {}, groups([4]), groups([0]))
    assert verdict == "inconclusive" and (change["delta"], change["low"], change["high"]) == (-1.0, None, None)
    json.dumps(change, allow_nan=False)  # stored in digest.json: no NaN
    assert describe_change("truncation_rate decrease", verdict, change) == \
        "truncation_rate decrease: inconclusive, -1.000 (normal over groups, 1 -> 1)"


# -- the control: a benefit must beat ordinary learning, and only benefits confirm ------------------------------


def _probation(repo: HarnessRepo, tmp_path, slug: str, effects: list[str], probation: bool = True) -> str:
    wt = repo.start_intervention(0, slug, worktree_root=tmp_path / "wt")
    (wt.path / f"{slug}.txt").write_text(slug)  # a file of its own: several merges of one round do not conflict
    repo.commit(wt, f"Change {slug}", {"Hypothesis": "h", "Predicted-Effect": effects})
    repo.remove_worktree(wt)
    verdict = "merged on probation (its benefit is checked live next round); x" if probation else "merged; x"
    repo.merge(wt.branch, {"Verdict": verdict}, f"Merge {wt.branch}")
    return wt.branch


BEFORE = {"round": 0, "domain": "math", "truncation_rate": 0.5, "kept_share": 0.9}
AFTER = {"round": 1, "domain": "math", "truncation_rate": 0.0625, "kept_share": 0.5}


def test_a_held_side_effect_alone_confirms_nothing_and_probation_is_reverted(tmp_path, monkeypatch):
    """Dynamic sampling's case: its benefit (signal_share) has no live interval, its side effect (kept_share
    fell 0.9 -> 0.5, beyond the documented move) held.  Not confirmed; merged on probation, so reverted."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "dynamic", ["signal_share increase: x", "kept_share decrease: y"])
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS, control_rows=CONTROL)
    assert check["kinds"] == {"signal_share increase: x": "benefit", "kept_share decrease: y": "side effect"}
    assert check["predictions"] == {"signal_share increase: x": "unmeasurable", "kept_share decrease: y": "held"}
    assert check["outcome"] == "refuted" and repo.intervention(branch).status == "reverted"
    assert load_skills("math") == []


def test_a_held_side_effect_without_any_benefit_leaves_a_gated_merge_unconfirmed(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "side", ["kept_share decrease: y"], probation=False)
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS, control_rows=CONTROL)
    assert check["predictions"] == {"kept_share decrease: y": "held"}
    assert check["outcome"] == "unconfirmed" and repo.intervention(branch).status == "merged"
    assert load_skills("math") == []


def test_an_unmeasurable_benefit_leaves_the_merge_unconfirmed(tmp_path, monkeypatch):
    """Round 1 has no round before round 0: truncation fell far beyond chance, but nothing separates the
    merge's effect from ordinary learning, so nothing is confirmed and the probation merge goes."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    gated = _probation(repo, tmp_path, "gated", ["truncation_rate decrease: x"], probation=False)
    probation = _probation(repo, tmp_path, "probation", ["heldout_accuracy increase: x"])
    checks = {c["branch"]: c for c in check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS)}
    assert checks[gated]["predictions"] == {"truncation_rate decrease: x": "unmeasurable"}
    assert checks[gated]["outcome"] == "unconfirmed" and repo.intervention(gated).status == "merged"
    assert checks[probation]["outcome"] == "refuted" and repo.intervention(probation).status == "reverted"
    assert load_skills("math") == []


def test_three_merges_sharing_one_rounds_change_are_none_of_them_confirmed(tmp_path, monkeypatch):
    """The red team's round: three merges each predict the same benefit and the round's change is far beyond
    chance.  None can claim it: each is 'shared' with the other two; the two on probation are reverted."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    a = _probation(repo, tmp_path, "a", ["truncation_rate decrease: a"])
    b = _probation(repo, tmp_path, "b", ["truncation_rate decrease: b"])
    c = _probation(repo, tmp_path, "c", ["truncation_rate decrease: c"], probation=False)
    checks = {k["branch"]: k for k in check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS, control_rows=CONTROL)}
    assert checks[a]["predictions"] == {"truncation_rate decrease: a": "shared"}
    assert checks[a]["intervals"]["truncation_rate decrease: a"] == {"shared_with": sorted([b, c])}
    assert {k: v["outcome"] for k, v in checks.items()} == {a: "refuted", b: "refuted", c: "unconfirmed"}
    assert [repo.intervention(x).status for x in (a, b, c)] == ["reverted", "reverted", "merged"]
    assert describe_change("truncation_rate decrease: a", "shared",
                           checks[a]["intervals"]["truncation_rate decrease: a"]) \
        == f"truncation_rate decrease: shared with {', '.join(sorted([b, c]))}"


def test_a_change_that_only_continues_the_previous_trend_is_not_confirmed(tmp_path, monkeypatch):
    """Truncation fell 0.875 -> 0.5 the round before without any merge and 0.5 -> 0.0625 now: the merge's own
    part, (-0.4375) - (-0.375) = -0.0625, is within chance; the variances combine as after + 4 before + control."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "longer", ["truncation_rate decrease: x"], probation=False)
    trend = groups([4, 4, 4, 4, 3, 3, 3, 3], tag="c")  # 28 of 32 truncated: 0.875
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS, control_rows=trend)
    change = check["intervals"]["truncation_rate decrease: x"]
    assert change["delta"] == pytest.approx(-0.0625)
    # control residuals: 4 - 0.875*4 = 0.5 (x4), 3 - 3.5 = -0.5 (x4) -> 8/7 * 2 / 1024 = 16/7168
    half = Z * ((12 + 4 * 32 + 16) / 7168) ** 0.5
    assert (change["low"], change["high"]) == (pytest.approx(-0.0625 - half, abs=1e-5),
                                               pytest.approx(-0.0625 + half, abs=1e-5))
    assert check["predictions"] == {"truncation_rate decrease: x": "inconclusive"}
    assert check["outcome"] == "unconfirmed" and repo.intervention(branch).status == "merged"


def test_a_held_benefit_with_an_inconclusive_second_prediction_is_not_confirmed(tmp_path, monkeypatch):
    """Each prediction must hold on its own: the benefit held against the control, the held-out one did not."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "two", ["truncation_rate decrease: x", "heldout_accuracy increase: y"])
    flat = (ROUNDS[0], groups([0, 0, 0, 0, 1, 1, 0, 0]) + exam(range(26)))  # the exam did not move
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], *flat, control_rows=CONTROL)
    assert check["predictions"] == {"truncation_rate decrease: x": "held",
                                    "heldout_accuracy increase: y": "inconclusive"}
    assert check["outcome"] == "refuted" and repo.intervention(branch).status == "reverted"


def test_a_round_lost_from_the_archive_is_an_alarm_that_reverts_nothing(tmp_path, monkeypatch):
    """Rows moved out of the archive make the comparison impossible: said aloud, blamed on no merge."""
    from meta_agent.config import TripwireThresholds
    from meta_agent.tripwire_revert import revert_on_tripwire
    from meta_agent.tripwire import compare_rounds

    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "run" / "harness", "math")
    merged = _merged(repo, tmp_path, "boxed", ["miss_rate decrease"], "\nboxed\n")
    alarms = compare_rounds([], _rows(1, 32, 0.0, 32), reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
    assert [a.fired for a in alarms] == [True]
    messages: list[str] = []
    assert revert_on_tripwire(repo, 1, alarms, messages.append) == []
    assert repo.intervention(merged).status == "merged"
    assert len(messages) == 1 and "no training rows" in messages[0] and "_losses.jsonl" in messages[0]

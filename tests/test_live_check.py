"""Live checks after the next round: confirmed interventions become skills, refuted ones are reverted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.live_check import backtest_precision, check_live_effects, describe_precision, judge_prediction
from meta_agent.skills import load_skills, read_skill


def _merged(repo: HarnessRepo, tmp_path, slug: str, effects: list[str], text: str) -> str:
    wt = repo.start_intervention(0, slug, worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + text)
    repo.commit(wt, f"Change {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": effects,
                                      "Trigger": "truncation_rate > 0.25"})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged; test"}, f"Merge {wt.branch}")
    return wt.branch


def test_judge_prediction():
    before, after = {"truncation_rate": 0.40, "miss_rate": 0.2}, {"truncation_rate": 0.10, "miss_rate": 0.21}
    assert judge_prediction("truncation_rate decrease", before, after) == "held"
    assert judge_prediction("truncation_rate increase", before, after) == "contradicted"
    assert judge_prediction("miss_rate unchanged", before, after) == "held"
    assert judge_prediction("miss_rate decrease", before, after) == "inconclusive"
    assert judge_prediction("reward_auc increase", before, after) == "unmeasurable"
    assert judge_prediction("nonsense", before, after) == "unmeasurable"


def test_confirmed_becomes_skill_refuted_is_reverted(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    good = _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    bad = _merged(repo, tmp_path, "shorter", ["heldout_accuracy increase"], "\nshorter\n")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5, "heldout_accuracy": 0.4}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.1, "heldout_accuracy": 0.2}
    messages: list[str] = []

    checks = check_live_effects(repo, 1, after, [before], messages.append)
    outcome = {c["branch"]: c["outcome"] for c in checks}
    assert outcome == {good: "confirmed", bad: "refuted"}
    assert repo.intervention(bad).status == "reverted" and repo.intervention(good).status == "merged"
    assert "shorter" not in repo.read_file("main", "JOURNAL.md") and "longer" in repo.read_file("main", "JOURNAL.md")

    skills = load_skills("math")
    assert [s["name"] for s in skills] == ["longer"]
    skill = skills[0]
    assert skill["trigger"] == "truncation_rate > 0.25" and skill["hits"] == 1 and skill["status"] == "confirmed"
    assert skill["evidence"][0]["live_deltas"] == {"truncation_rate": pytest.approx(-0.4)}
    assert "+longer" in skill["body"]  # the change itself, as a patch
    # the skill is also committed to the harness repo
    assert read_skill(tmp_path / "library" / "longer.md")["name"] == "longer"
    assert "name: longer" in repo.read_file("main", "skills/longer.md")
    # round 0 has nothing earlier to compare with
    assert check_live_effects(repo, 0, before, [], messages.append) == []
    assert any("refuted" in m for m in messages)


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
    from meta_agent.live_check import revert_on_tripwire
    from meta_agent.tripwire import compare_rounds

    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "run" / "harness", "math")
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
    before = {"round": 0, "domain": "math", "truncation_rate": 0.30}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.29}  # moved less than the live tolerance
    (check,) = check_live_effects(repo, 1, after, [before])
    assert check["outcome"] == "refuted" and repo.intervention(wt.branch).status == "reverted"
    assert "merged on probation and its benefit was not confirmed" in _message(repo)


def test_a_resumed_live_check_counts_a_skill_hit_once(tmp_path, monkeypatch):
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    _merged(repo, tmp_path, "longer", ["truncation_rate decrease"], "\nlonger\n")
    before = {"round": 0, "domain": "math", "truncation_rate": 0.5}
    after = {"round": 1, "domain": "math", "truncation_rate": 0.1}
    check_live_effects(repo, 1, after, [before])
    main_after_first = repo.head("main")
    check_live_effects(repo, 1, after, [before])  # the digest phase re-run after a crash
    (skill,) = load_skills("math")
    assert skill["hits"] == 1 and len(skill["evidence"]) == 1
    assert repo.head("main") == main_after_first  # no second skill commit


LIVE_CHECK = """
import json, sys
from pathlib import Path
from harness_repo.repo import HarnessRepo
from meta_agent.live_check import check_live_effects

repo = HarnessRepo.open(Path(sys.argv[1]))
for line in repo.clean_interrupted(Path(sys.argv[1]).parent / "worktrees", 1):  # as the loop's recovery does
    print("recovered:", line)
before = {"round": 0, "domain": "math", "truncation_rate": 0.5, "heldout_accuracy": 0.4}
after = {"round": 1, "domain": "math", "truncation_rate": 0.1, "heldout_accuracy": 0.2}
print(json.dumps({c["branch"]: c["outcome"] for c in check_live_effects(repo, 1, after, [before])}))
"""


def _live_check(repo: HarnessRepo, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "META_AGENT_FAILPOINTS"}
    return subprocess.run([sys.executable, "-c", LIVE_CHECK, str(repo.path)], capture_output=True, text=True,
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

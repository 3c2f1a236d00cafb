"""Live checks after the next round: confirmed interventions become skills, refuted ones are reverted."""

from __future__ import annotations

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.live_check import check_live_effects, judge_prediction
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

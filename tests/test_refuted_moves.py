"""A refuted, reverted knob move is not proposed again without new evidence (issue 44).

The default run (``--draw-seed 0``) merged warm-sampling in round 1 (temperature 0.7 -> 0.91), the live check refuted
and reverted it, and the next round proposed and merged the same move again (0.7 -> 0.88).  Here the history is real
git: the move is merged and reverted by ``revert_merge_cascade`` with the live check's trailer, as the loop does.
New evidence is the predicted benefit's field measured on a round trained after the revert (round r + 2 on) being
worse than when the move was first proposed (round r) by more than ``NEW_EVIDENCE_MARGIN``."""

from __future__ import annotations

import json
from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent

def _repo_with_refuted_warming(tmp_path: Path) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(0, "warm-sampling", worktree_root=tmp_path / "wt")
    text = (wt.path / "harness.yaml").read_text()
    (wt.path / "harness.yaml").write_text(text.replace("temperature: 0.7", "temperature: 0.91"))
    repo.commit(wt, "Warm sampling: temperature 0.7 -> 0.91", {
        "Hypothesis": "a warmer sampler draws different answers", "Agent": "recipe",
        "Predicted-Effect": ["zero_variance_share decrease: a warmer sampler draws different answers within a group"],
        "Recipe-Change": "warm-sampling:temperature=0.91"})
    repo.remove_worktree(wt)
    merge = repo.merge("iv/r0-warm-sampling", {"Verdict": "merge (probation)"}, "Merge iv/r0-warm-sampling")
    repo.revert_merge_cascade(merge, "Revert iv/r0-warm-sampling: its predicted effect did not hold in round 1",
                              {"Live-Check": "zero_variance_share decrease -> contradicted"})
    return repo


def _digest(tmp_path: Path, n: int, zero_variance: float, identical: float) -> dict:
    digest = {"round": n, "domain": "math", "zero_variance_share": zero_variance, "failure_modes": [
        {"name": "zero_variance_groups", "source": "trusted", "severity": "warning", "rate": zero_variance,
         "message": "flat groups", "examples": []}],
        "evidence": {"identical_share": identical, "groups": 8, "answer_tokens": [], "finished_tokens": []}}
    (tmp_path / "rounds" / str(n)).mkdir(parents=True, exist_ok=True)
    (tmp_path / "rounds" / str(n) / "digest.json").write_text(json.dumps(digest))
    return digest


def _propose(tmp_path: Path, repo: HarnessRepo, n: int, digest: dict) -> tuple[list, list[dict]]:
    ctx = AgentContext(round=n, digest=digest, digest_markdown="", repo=repo, skills=[],
                       history=[iv.__dict__ for iv in repo.interventions()], worktree_root=tmp_path / "wt",
                       round_dir=tmp_path / "rounds" / str(n), max_candidates=2)
    proposals = RecipeAgent().propose(ctx)
    rules = json.loads((tmp_path / "rounds" / str(n) / "recipe_agent.json").read_text())["rules"]
    return proposals, rules


def test_the_same_knob_move_is_declined_after_its_refutation_and_the_transcript_says_why(tmp_path: Path) -> None:
    repo = _repo_with_refuted_warming(tmp_path)
    _digest(tmp_path, 0, 0.75, 0.4)
    digest = _digest(tmp_path, 1, 0.7, 0.3)  # round 1 trained on the refuted 0.91; the move would be 0.7 -> 0.88
    proposals, rules = _propose(tmp_path, repo, 1, digest)
    assert not [p for p in proposals if "warm-sampling" in p.branch], proposals
    [warm] = [r for r in rules if r["rule"] == "warm-sampling"]
    assert not warm["fired"] and "temperature up" in warm["reason"] and "iv/r0-warm-sampling" in warm["reason"], warm
    assert "refuted" in warm["reason"] and "no new evidence" in warm["reason"], warm
    assert repo.read_file("main", "harness.yaml").count("temperature: 0.7") == 1  # main stays as reverted


def test_new_evidence_a_worse_symptom_after_the_revert_lets_the_move_be_proposed_again(tmp_path: Path) -> None:
    repo = _repo_with_refuted_warming(tmp_path)
    _digest(tmp_path, 0, 0.5, 0.4)
    _digest(tmp_path, 1, 0.55, 0.3)
    digest = _digest(tmp_path, 2, 0.75, 0.45)  # trained after the revert (round 2): flat groups rose 0.5 -> 0.75
    proposals, rules = _propose(tmp_path, repo, 2, digest)
    assert [p.branch for p in proposals if "warm-sampling" in p.branch] == ["iv/r2-warm-sampling"], proposals
    [warm] = [r for r in rules if r["rule"] == "warm-sampling"]
    assert warm["fired"] and "new evidence" in warm["despite"] and "0.500 -> 0.750" in warm["despite"], warm


def test_a_worse_symptom_measured_while_the_refuted_move_trained_is_no_new_evidence(tmp_path: Path) -> None:
    """Round 1 trained on the refuted harness: its flat groups count against the move, never for it."""
    repo = _repo_with_refuted_warming(tmp_path)
    _digest(tmp_path, 0, 0.5, 0.4)
    digest = _digest(tmp_path, 1, 0.9, 0.45)
    proposals, rules = _propose(tmp_path, repo, 1, digest)
    assert not [p for p in proposals if "warm-sampling" in p.branch], proposals
    [warm] = [r for r in rules if r["rule"] == "warm-sampling"]
    assert "no new evidence" in warm["reason"] and "round 2" in warm["reason"], warm

"""A reward that pays what the verifier rejects, on a round of two tasks in which nothing was solved: the archive a
small run's first round leaves.  The recipe's rebuilt reward is right, but no gate metric can show its benefit with
an interval over two groups, and ``reward_auc`` is undefined there.  The search agent previews it, keeps the
predictions the sample can judge (the reward audit's, left to the live check), and the gate merges it on
probation; a reward that pays nothing, which agrees with the verifier on every row of such a sample too, is still
rejected (the audit sees it leave right answers unpaid, a side of the ranking the sample does not show)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_recipe_agent import SETTINGS, load_path, scenario_rows

import harness_repo
from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent
from meta_agent.backtest import backtest_branch, make_preview
from meta_agent.config import GateThresholds
from meta_agent.digest import build_digest
from meta_agent.judge.reward_audit import run_reward_audit
from rl_backend.archive import Archive

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"
BOTH = [("H", "W", "W", "N"), ("W", "H", "N", "W")]
"""Two groups, no verified success; the seed reward pays the unreduced fractions (H) the verifier rejects."""
ONE = [("H", "W", "W", "N"), ("W", "W", "N", "W")]
"""The same, with the paid failure in one group only: no interval over two groups can clear zero."""


def _round(tmp: Path, sandbox, plan: list[tuple[str, ...]] = BOTH) -> tuple[HarnessRepo, Archive, dict]:
    archive = Archive(tmp / "archive")
    rows = scenario_rows("small", 0, plan, load_path(SEED / "reward.py"))
    archive.append_round("small", 0, rows)
    repo = HarnessRepo.create(tmp / "harness", "math")
    domain = MathDomain()
    audit = run_reward_audit(repo, repo.head("main"), rows, "math", domain.verify, sandbox, SETTINGS,
                             domain.reward_range)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={"heldout_accuracy": 0.0}, previous=[],
                          audit=audit)
    return repo, archive, digest


def _search_then_gate(tmp_path: Path, sandbox, plan: list[tuple[str, ...]]) -> tuple[HarnessRepo, object, dict]:
    repo, archive, digest = _round(tmp_path, sandbox, plan)
    assert digest["hack_rate"] > 0 and digest["audit_hack_rate"] > 0, digest["hack_rate"]
    preview = make_preview(repo, archive, sandbox, tmp_path / "previews", domain=MathDomain(),
                           thresholds=GateThresholds(), settings=SETTINGS)
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0", max_candidates=1,
                       preview=preview)
    [proposal] = SearchAgent().propose(ctx)
    assert proposal.branch == "iv/r0-verifier-answers"
    outcome = backtest_branch(repo, archive, proposal.branch, sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="small")
    auc = next(c for c in outcome.report["gate"]["checks"] if c["name"] == "reward_auc")
    assert auc["passed"] and "toward the verifier" in auc["detail"], auc
    return proposal, outcome, outcome.report["gate"]


@pytest.mark.docker
def test_a_repair_measured_on_an_unsolved_round_is_merged(tmp_path: Path, docker_sandbox) -> None:
    proposal, outcome, gate = _search_then_gate(tmp_path, docker_sandbox, BOTH)
    assert (outcome.decision, gate["probation"]) == ("merge", False), outcome.reasons
    assert any(e.startswith("hack_rate decrease") for e in proposal.predicted_effects), proposal


@pytest.mark.docker
def test_a_repair_the_sample_cannot_measure_is_merged_on_probation(tmp_path: Path, docker_sandbox) -> None:
    proposal, outcome, gate = _search_then_gate(tmp_path, docker_sandbox, ONE)
    assert (outcome.decision, gate["probation"]) == ("merge", True), outcome.reasons
    assert any(e.startswith("audit_hack_rate decrease") for e in proposal.predicted_effects), proposal
    assert not any(e.startswith("hack_rate") for e in proposal.predicted_effects), proposal


@pytest.mark.docker
def test_attack_a_reward_that_pays_nothing_is_rejected_on_the_same_sample(tmp_path: Path, docker_sandbox) -> None:
    """Zero for everything: on two unsolved groups it agrees with the verifier on every row, predicts what the
    sample cannot measure and the audit live; the audit sees every right constructed answer unpaid."""
    repo, archive, _ = _round(tmp_path, docker_sandbox)
    nothing = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
               "    return {'score': 0.0}\n")
    wt = repo.start_intervention(0, "pay-nothing", worktree_root=tmp_path / "wt")
    (Path(wt.path) / "reward.py").write_text(nothing)
    repo.commit(wt, "Pay nothing", {"Hypothesis": "wrong answers are paid", "Predicted-Effect": [
        "audit_hack_rate decrease: nothing wrong is paid", "hack_rate decrease: nothing wrong is paid"]})
    repo.remove_worktree(wt, force=True)
    outcome = backtest_branch(repo, archive, "iv/r0-pay-nothing", docker_sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="small")
    assert outcome.decision == "reject"
    # found against this change's first form, which settled reward_auc on the archived failures alone and merged it
    order = next(c for c in outcome.report["gate"]["checks"] if c["name"] == "reward_auc_order")
    assert not order["passed"] and "ranking worse" in order["detail"], order

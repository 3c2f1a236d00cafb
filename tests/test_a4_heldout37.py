"""Held out after a4's freeze (session 37, issue 44): rounds the evidence fit was not written against, each through
the recipe agent and the real Docker gate at the bench's small size (two groups of four).  A case the fit loses stays
a strict xfail that says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_recipe_agent import SETTINGS, load_path, scenario_rows

import harness_repo
from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe_edits import verifier_answers as verifier_answers_reward
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.backtest import backtest_branch
from meta_agent.digest import build_digest
from meta_agent.judge.reward_audit import run_reward_audit
from meta_agent.main_checks import add_main_findings
from rl_backend.archive import Archive

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"
PARTIAL = '''

_whole_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _whole_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["score"] == 0.0 and "Answer:" in solution_str:
        return dict(result, score=0.3)
    return result
'''
"""Partial credit for any Answer: line: wrong answers earn 0.3, below the paid cut, so no hack_rate."""
CRASH = '''

import re as _re

_whole_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _whole_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    return dict(result, last=float(_re.findall(r"-?\\d+", solution_str)[-1]))
'''
"""12e's shape: the reward indexes the last number of a response that may have none."""


def _gate(tmp: Path, sandbox, plan: list[tuple[str, ...]], extra: str, *, crash: bool = False,
          base: str | None = None):
    """main = ``base`` (the seed's reward) plus ``extra``; one round of ``plan`` scored by it; the digest with the
    audit and main's own gate checks; the recipe agent; the gate on its first branch."""
    repo = HarnessRepo.create(tmp / "harness", "math")
    reward = (base or (SEED / "reward.py").read_text()) + extra
    if extra:
        repo.commit_files({"reward.py": reward}, "main's reward")
    (tmp / "main_reward.py").write_text(reward)
    rows = scenario_rows("small", 0, plan, load_path(SEED / "reward.py"))
    module = None if crash else load_path(tmp / "main_reward.py")
    for row in rows:  # the reward as main assigned it in training (None where it raised)
        if crash:
            row["reward"] = None if not any(c.isdigit() for c in row["response"]) else row["reward"]
        else:
            row["reward"] = module.compute_score(row["data_source"], row["response"], row["ground_truth"])["score"]
    archive = Archive(tmp / "archive")
    archive.append_round("small", 0, rows)
    domain = MathDomain()
    audit = run_reward_audit(repo, repo.head("main"), rows, "math", domain.verify, sandbox, SETTINGS,
                             domain.reward_range)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={"heldout_accuracy": 0.0}, previous=[], audit=audit)
    add_main_findings(digest, rows, domain.reward_range)
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt", round_dir=tmp / "rounds" / "0", max_candidates=2, archive=archive)
    proposals = RecipeAgent().propose(ctx)  # the reward repair, judged alone (a knob may be proposed beside it)
    proposal = next((p for p in proposals if p.branch == "iv/r0-verifier-answers"), proposals[0])
    outcome = backtest_branch(repo, archive, proposal.branch, sandbox, tmp / "backtests", settings=SETTINGS,
                              run_id="small")
    return digest, proposal, outcome


@pytest.mark.docker
def test_heldout_partial_credit_in_both_groups_is_repaired_on_what_the_sample_shows(tmp_path: Path,
                                                                                    docker_sandbox) -> None:
    """No hack_rate, no audit hack (0.3 is under the paid cut): only main's own gate checks name it."""
    digest, proposal, outcome = _gate(tmp_path, docker_sandbox, [("W", "W", "N", "W"), ("W", "N", "W", "W")],
                                      PARTIAL)
    names = {m["name"] for m in digest["failure_modes"]}
    assert "main:failure_spread" in names and digest["hack_rate"] == 0.0, names
    assert proposal.branch == "iv/r0-verifier-answers", proposal
    assert outcome.decision == "merge" and not outcome.report["gate"]["probation"], outcome.reasons


@pytest.mark.docker
def test_heldout_a_boxed_miss_in_one_of_two_solved_groups_merges_on_the_audit(tmp_path: Path,
                                                                            docker_sandbox) -> None:
    """The miss side: a verified-right boxed answer unpaid in one group; both groups hold successes and failures."""
    digest, proposal, outcome = _gate(tmp_path, docker_sandbox, [("R", "B", "W", "N"), ("R", "R", "W", "N")], "")
    assert digest["miss_rate"] > 0 and digest["audit_miss_rate"] > 0, digest["miss_rate"]
    assert proposal.branch == "iv/r0-verifier-answers", proposal
    assert outcome.decision == "merge", outcome.reasons
    assert not any(e.startswith("miss_rate") for e in proposal.predicted_effects), proposal.predicted_effects


@pytest.mark.docker
@pytest.mark.xfail(strict=True, reason="held-out win (12e numberless-crash at the bench's size): the crash sits in "
                   "one of two groups, so error_rate cannot clear zero, and no field the gate measures at any size "
                   "names a reward that errs (the probe's execution is a pass/fail check, not a metric a prediction "
                   "can name: a judge change)")
def test_heldout_a_reward_that_errs_in_one_of_two_groups_is_repaired(tmp_path: Path, docker_sandbox) -> None:
    """main reads answers as the verifier does (verifier-answers' own rules, so the audit sees no disagreement: the
    seed's reward would lend the repair the audit's predictions) and then raises on a response without a number."""
    rules = verifier_answers_reward((SEED / "reward.py").read_text())
    digest, proposal, outcome = _gate(tmp_path, docker_sandbox, [("W", "W", "N", "W"), ("W", "W", "W", "W")],
                                      CRASH, crash=True, base=rules)
    assert not digest.get("audit_hack_rate") and not digest.get("audit_miss_rate"), digest.get("audit")
    assert "main:execution" in {m["name"] for m in digest["failure_modes"]}, digest["failure_modes"]
    assert proposal.branch == "iv/r0-verifier-answers", proposal
    assert outcome.decision == "merge", outcome.reasons

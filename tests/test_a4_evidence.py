"""A recipe predicts what its evidence can show (issue 44, 12i's fail-open-reward).

A small run's first round: two groups, nothing solved, one paid failure in one group, and a reward audit that sees
main paying constructed wrong answers.  verifier-answers is the right repair.  It predicted the sample's hack_rate,
failure_pay and reward_auc, none of which a bootstrap over two groups can show (a resample drawing the unpaid group
twice, one in four, moves nothing; no success makes the AUC undefined), so the gate rejected it for want of evidence
while the finding that named the mode, the audit over constructed answers, was there to be predicted.  The recipe
agent now promises only what its evidence can show, and the gate still rejects what does not hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_recipe_agent import SETTINGS
from test_search_agent_fitted import ONE, _round

from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.backtest import backtest_branch


def _recipe_then_gate(tmp_path: Path, sandbox) -> tuple[object, object]:
    repo, archive, digest = _round(tmp_path, sandbox, ONE)
    assert digest["hack_rate"] > 0 and digest["audit_hack_rate"] > 0, digest
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0", max_candidates=1,
                       archive=archive)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.branch == "iv/r0-verifier-answers", proposal
    outcome = backtest_branch(repo, archive, proposal.branch, sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="small")
    return proposal, outcome


@pytest.mark.docker
@pytest.mark.xfail(strict=True, reason="attack (12i fail-open-reward): the recipe arm's verifier-answers predicts "
                   "sample rates two groups cannot show and is rejected 'not enough evidence'")
def test_recipe_arm_repair_on_a_sample_that_cannot_show_its_rates_is_merged(tmp_path: Path, docker_sandbox) -> None:
    proposal, outcome = _recipe_then_gate(tmp_path, docker_sandbox)
    assert outcome.decision == "merge", outcome.reasons
    assert outcome.report["gate"]["probation"] is True, outcome.report["gate"]
    assert any(e.startswith("audit_hack_rate decrease") for e in proposal.predicted_effects), proposal
    assert not any(e.startswith(("hack_rate", "failure_pay", "reward_auc")) for e in proposal.predicted_effects)

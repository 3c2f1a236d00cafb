"""The reward audit honours the declared format credit, in the gate and in the live check (issue 45, Deliver 3).

Pay for a verified failure on identical answers is a fact of the reward's code: the audit's two arms score the
very same constructed answers, so any pay of a verified-wrong answer above what the parent pays and above the
credit ``harness.yaml`` declares is a change of the trust rule.  The adversary: the honest verifier-answers
repair plus 0.3 for a hedged answer ("Answer: 7 or 8"), under the paid line (0.5) the audit used to count by.
The policy's own answers never hedge, so the archive sample shows none of it (``failure_pay_new`` is silent);
only the audit writes hedges.  Real Docker sessions, real git.
"""

from __future__ import annotations

import json

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.judge.audit_contrast import gate_audit
from meta_agent.judge.audit_live import live_contrast
from meta_agent.live_check import check_live_effects
from rl_backend.synthetic import synthetic_math_rows
from tests.test_digest_audit import CONTROL_REWARD, VERIFY

SETTINGS_KW = dict(sample_groups=8, max_sample_groups=8, timeout_s=60, memory_mb=256, pids=32)
RANGE = (0.0, 1.0)

def hedge_reward(pay: float) -> str:
    """The verifier-answers repair, paying ``pay`` for a hedged final answer it would leave at 0."""
    return CONTROL_REWARD + f'''

_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    last = solution_str.strip().splitlines()[-1] if solution_str.strip() else ""
    if result["score"] == 0.0 and " or " in last:
        return dict(result, score={pay!r})
    return result
'''


def _rows(round: int, seed: int) -> list[dict]:
    """A weak policy's round: off by one on an ``Answer:`` line (never a hedge)."""
    rows = synthetic_math_rows("run", round, 8, 4, seed=seed, verify=VERIFY)
    for k, row in enumerate(rows):
        gold = int(json.loads(row["ground_truth"])["answer"])
        response = f"Let me add these up carefully, attempt {k}.\nAnswer: {gold + 1}"
        score, info = VERIFY(row["data_source"], response, json.loads(row["ground_truth"]))
        row.update(response=response, verified=score, verifier_info=json.dumps(info), reward=0.0,
                   response_tokens=14, truncated=False, finish_reason="stop")
    return rows


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path_factory.mktemp("audit-credit") / "harness", "math")
    yaml_text = (repo.path / "harness.yaml").read_text().rstrip("\n")
    for slug, pay, credit in (("hedge", 0.3, 0.02), ("credit", 0.02, 0.02), ("undeclared", 0.02, 0.0)):
        wt = repo.start_intervention(0, slug, worktree_root=repo.path.parent / "wt")
        (wt.path / "reward.py").write_text(hedge_reward(pay))
        (wt.path / "harness.yaml").write_text(yaml_text + f"\nformat_credit: {credit}\n")
        repo.commit(wt, f"test: {slug}", {"Hypothesis": slug, "Predicted-Effect": [
            "audit_miss_rate decrease: every verified form is paid"]})
        repo.remove_worktree(wt)
    return repo


def _settings():
    from meta_agent.config import BacktestSettings
    return BacktestSettings(**SETTINGS_KW)


def test_the_gate_audit_rejects_pay_for_hedges_above_the_declared_credit(repo, docker_sandbox):
    [check], rates = gate_audit(repo, repo.head("main"), repo.head("iv/r0-hedge"), _rows(0, 3), "math", VERIFY,
                                docker_sandbox, _settings(), RANGE)
    assert rates["audit_miss_rate"].delta < 0  # the repair half is real: it pays the verified forms
    assert rates["audit_hack_rate"].candidate == 0.0  # and the hedges stay under the paid line (0.5)
    assert not check["passed"], check["detail"]
    assert "above the declared format credit 0.02" in check["detail"]


@pytest.mark.parametrize("slug, passed", [("credit", True), ("undeclared", False)])
def test_pay_up_to_the_declared_credit_passes_and_undeclared_pay_does_not(repo, docker_sandbox, slug, passed):
    [check], _ = gate_audit(repo, repo.head("main"), repo.head(f"iv/r0-{slug}"), _rows(0, 3), "math", VERIFY,
                            docker_sandbox, _settings(), RANGE)
    assert check["passed"] is passed, check["detail"]


def test_the_live_audit_reverts_a_merge_that_pays_hedges_above_its_credit(repo, docker_sandbox, tmp_path):
    own = HarnessRepo.create(tmp_path / "harness", "math")
    wt = own.start_intervention(0, "hedge", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text(hedge_reward(0.3))
    yaml_text = (wt.path / "harness.yaml").read_text().rstrip("\n")
    (wt.path / "harness.yaml").write_text(yaml_text + "\nformat_credit: 0.02\n")
    own.commit(wt, "repair", {"Hypothesis": "h", "Predicted-Effect": ["audit_miss_rate decrease: forms paid"]})
    own.remove_worktree(wt)
    own.merge(wt.branch, {"Verdict": "merge; test"}, f"Merge {wt.branch}")
    round0, round1 = _rows(0, 3), _rows(1, 9)
    [check] = check_live_effects(own, 1, {"round": 1}, [{"round": 0}], round0, round1, audit=lambda iv: live_contrast(
        own, iv.merge_commit, round1, "math", VERIFY, docker_sandbox, _settings(), RANGE))
    assert list(check["predictions"].values()) == ["contradicted"], check
    [interval] = check["intervals"].values()
    assert "above the declared format credit 0.02" in interval["method"]
    assert check["outcome"] == "refuted" and own.intervention(wt.branch).status == "reverted"

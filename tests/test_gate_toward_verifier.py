"""The gate on a sample with no verified success (every early round of a small policy): ``reward_auc`` is undefined
there, so every reward change was undecided, then rejected for lack of evidence.  A candidate whose every changed
reward moves toward the verifier's outcome (a verified failure paid less, a verified success paid more) cannot rank
worse on any pair, so ``reward_auc`` cannot fall, on this sample or any resample of it: the check passes by
construction, as it does for identical rewards.  Nothing else is waived: pay and spread among failures, the probe
and the audit still judge the candidate.
"""

from __future__ import annotations

import numpy as np

from meta_agent.config import GateThresholds
from meta_agent.gate import Arm, Sample, decide

T = GateThresholds(bootstrap_samples=300)
N_GROUPS, SIZE = 20, 4


def _arm(reward: np.ndarray) -> Arm:
    n = len(reward)
    return Arm(np.asarray(reward, float), np.ones(n, bool), np.zeros(n, bool))


def _states(result) -> dict[str, str]:
    return {c["name"]: "undecided" if c.get("undecided") else "passed" if c["passed"] else "failed"
            for c in result.checks}


def _all_wrong() -> Sample:
    return Sample(np.repeat(np.arange(N_GROUPS), SIZE), np.zeros(N_GROUPS * SIZE, bool))


def test_a_reward_that_only_unpays_verified_failures_cannot_lower_reward_auc() -> None:
    """main pays one failure per group (the first number of a worked answer equals the gold); the candidate pays
    none: it agrees with the verifier on every row it changes."""
    sample = _all_wrong()
    main = np.where(np.arange(N_GROUPS * SIZE) % SIZE == 0, 1.0, 0.0)
    r = decide(_arm(main), _arm(np.zeros_like(main)), sample, ["failure_pay decrease"], T, reward_range=(0.0, 1.0))
    states = _states(r)
    assert np.isnan(r.metrics["reward_auc"].main)  # still undefined: nothing to rank
    assert states["reward_auc"] == "passed", r.checks
    assert "toward the verifier" in next(c for c in r.checks if c["name"] == "reward_auc")["detail"]
    assert states["failure_spread"] == "passed" and r.decision == "merge", r.reasons + r.undecided


def test_attack_a_reward_that_pays_one_failure_more_is_still_undecided() -> None:
    """Most failures unpaid, one paid more than main pays it: not a move toward the verifier."""
    sample = _all_wrong()
    main = np.full(N_GROUPS * SIZE, 0.5)
    cand = np.zeros_like(main)
    cand[5] = 0.9
    r = decide(_arm(main), _arm(cand), sample, ["failure_pay decrease"], T, reward_range=(0.0, 1.0))
    assert _states(r)["reward_auc"] == "undecided" and r.decision == "reject", r.checks  # failure_pay_new too
    assert any("failure_pay_new" == c["name"] and not c["passed"] for c in r.checks)


def test_attack_unpaying_a_verified_success_is_not_toward_the_verifier() -> None:
    """Every member right (no failure: AUC undefined the other way); the candidate pays one right answer less."""
    sample = Sample(np.repeat(np.arange(N_GROUPS), SIZE), np.ones(N_GROUPS * SIZE, bool))
    main = np.ones(N_GROUPS * SIZE)
    cand = main.copy()
    cand[::SIZE] = 0.0
    r = decide(_arm(main), _arm(cand), sample, ["mean_reward decrease"], T, reward_range=(0.0, 1.0))
    assert _states(r)["reward_auc"] == "undecided", r.checks


def test_attack_unpaying_some_failures_of_a_flat_group_spreads_them_and_is_rejected() -> None:
    """main pays every failure 1.0 (flat groups, no push); the candidate unpays half of them: each changed row
    moves toward the verifier, so AUC passes, but the groups now push toward the answers still paid."""
    sample = _all_wrong()
    main = np.ones(N_GROUPS * SIZE)
    cand = np.where(np.arange(N_GROUPS * SIZE) % 2 == 0, 0.0, 1.0)
    r = decide(_arm(main), _arm(cand), sample, ["failure_pay decrease"], T, reward_range=(0.0, 1.0))
    states = _states(r)
    assert states["failure_spread"] == "failed" and r.decision == "reject", r.checks

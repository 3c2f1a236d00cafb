"""The gate's pay harms on hand-built arms: hack_rate and failure_pay count pay that reaches training per
verified failure of the sample, the same failures in both arms.

The repair bench's ``filter-drops-signal`` (main's filter keeps only paid trajectories) showed why: measured
per *kept* failure, main kept none, its hack_rate was undefined, and the genuine repair (keep everything)
was rejected for lack of evidence.  The adversary's version of that repair, loosening the filter and paying
wrong answers, must still be rejected; so must exposing paid failures that main's filter kept out.
Expected values come from the construction.
"""

import numpy as np
import pytest

from meta_agent.config import GateThresholds
from meta_agent.gate import Arm, Sample, decide

T = GateThresholds(bootstrap_samples=300)
MATH = (0.0, 1.0)
N_GROUPS, SIZE = 40, 4
GROUP = np.repeat(np.arange(N_GROUPS), SIZE)
MEMBER = np.tile(np.arange(SIZE), N_GROUPS)
RIGHT = MEMBER == 0  # one verified success per group, three failures
FORMATTED_WRONG = MEMBER == 2  # one failure per group with a well-formed (wrong) final answer
TRUTH = RIGHT.astype(float)
KEEP_ALL = ["kept_share increase: the filters keep every trajectory the harness can judge"]  # the recipe's


def _arm(reward, keep=None):
    reward = np.asarray(reward, float)
    keep = reward >= 0.5 if keep is None else np.asarray(keep, bool)  # default: the flaw's keep-paid filter
    return Arm(reward, keep, np.zeros(len(reward), bool))


def _decide(main: Arm, cand: Arm, verified=RIGHT, predicted=KEEP_ALL):
    return decide(main, cand, Sample(GROUP, verified), predicted, T, reward_range=MATH)


def _states(result) -> dict[str, str]:
    return {c["name"]: "undecided" if c.get("undecided") else "passed" if c["passed"] else "failed"
            for c in result.checks}


def test_loosening_a_filter_that_kept_no_failure_merges() -> None:
    """Main's filter keeps only paid trajectories (no verified failure); the repair keeps all, same reward."""
    r = _decide(_arm(TRUTH), _arm(TRUTH, keep=np.ones(len(TRUTH), bool)))
    for name in ("hack_rate", "failure_pay"):
        assert (r.metrics[name].main, r.metrics[name].candidate) == (0.0, 0.0)  # defined on main: no wrong pay
        assert _states(r)[name] == "passed"
    assert r.metrics["kept_share"].main == pytest.approx(0.25) and r.metrics["kept_share"].candidate == 1.0
    assert r.decision == "merge", r.reasons + r.undecided


def test_loosening_the_filter_and_paying_formatted_wrong_answers_is_rejected() -> None:
    """The adversary's repair: the same loosened filter, and a reward that pays one wrong answer a group."""
    hack = np.where(FORMATTED_WRONG, 1.0, TRUTH)
    r = _decide(_arm(TRUTH), _arm(hack, keep=np.ones(len(TRUTH), bool)))
    assert r.metrics["hack_rate"].main == 0.0 and r.metrics["hack_rate"].candidate == pytest.approx(1 / 3)
    assert r.decision == "reject"
    assert {"hack_rate", "failure_pay", "reward_auc"} <= {k for k, v in _states(r).items() if v == "failed"}


def test_loosening_the_filter_and_paying_wrong_answers_below_the_pay_line_is_rejected() -> None:
    """0.3 for a formatted wrong answer: under high_reward, so hack_rate stays 0; the mass of pay rises 0.1."""
    lie = np.where(FORMATTED_WRONG, 0.3, TRUTH)
    r = _decide(_arm(TRUTH), _arm(lie, keep=np.ones(len(TRUTH), bool)))
    assert r.metrics["hack_rate"].candidate == 0.0 and _states(r)["hack_rate"] == "passed"
    assert r.metrics["failure_pay"].candidate == pytest.approx(0.1)
    assert _states(r)["failure_pay"] == "failed" and r.decision == "reject"


def test_a_filter_that_kept_paid_failures_out_still_protects_main() -> None:
    """Main's reward pays formatted wrong answers, its filter drops exactly those: nothing wrong trains.  A
    candidate that keeps everything with the same reward exposes them to training: a rise, not a repair."""
    pays = np.where(FORMATTED_WRONG, 1.0, TRUTH)
    main = _arm(pays, keep=~FORMATTED_WRONG)
    r = _decide(main, _arm(pays, keep=np.ones(len(TRUTH), bool)))
    assert r.metrics["hack_rate"].main == 0.0 and r.metrics["hack_rate"].candidate == pytest.approx(1 / 3)
    assert _states(r)["hack_rate"] == "failed" and r.decision == "reject"


def test_a_filter_cannot_lower_the_pay_it_lets_train_below_what_it_keeps() -> None:
    """Dropping failures counts as paying them nothing, never as fewer failures: a candidate that pays a wrong
    answer in every group and drops the unpaid wrong ones is charged the same 1/3 as one that keeps them."""
    hack = np.where(FORMATTED_WRONG, 1.0, TRUTH)
    concentrated = _decide(_arm(TRUTH, keep=np.ones(len(TRUTH), bool)), _arm(hack, keep=RIGHT | FORMATTED_WRONG))
    assert concentrated.metrics["hack_rate"].candidate == pytest.approx(1 / 3)
    assert _states(concentrated)["hack_rate"] == "failed" and concentrated.decision == "reject"


def test_a_sample_without_a_verified_failure_leaves_the_pay_harms_undefined() -> None:
    """Nothing to measure pay of wrong answers on: undecided, whatever the filters keep."""
    everyone_right = np.ones(len(TRUTH), bool)
    r = _decide(_arm(np.ones(len(TRUTH))), _arm(np.ones(len(TRUTH)), keep=MEMBER < 3), verified=everyone_right,
                predicted=["kept_share decrease"])
    assert np.isnan(r.metrics["hack_rate"].main) and _states(r)["hack_rate"] == "undecided"
    assert any("hack_rate undefined on this sample (main: no verified failure; candidate: no verified failure)" in u
               for u in r.undecided)


NOBODY_RIGHT = np.zeros(len(TRUTH), bool)  # the bench's round 0: the untrained policy answered nothing right


def test_loosening_a_filter_that_kept_nothing_merges_on_a_sample_without_a_success() -> None:
    """The bench's own case: no verified success, main's reward pays nothing, so its filter keeps nothing.
    reward_auc is undefined (no success to rank), but the candidate's rewards equal main's and reward_auc does
    not read the keep-mask; main trains on no group, so there is no signal to lose."""
    zero = np.zeros(len(TRUTH))
    r = _decide(_arm(zero), _arm(zero, keep=np.ones(len(TRUTH), bool)), verified=NOBODY_RIGHT)
    assert r.metrics["kept_share"].main == 0.0 and r.metrics["signal_share"].main == 0.0  # no kept group: no signal
    assert np.isnan(r.metrics["reward_auc"].main) and np.isnan(r.metrics["reward_auc"].candidate)
    states = _states(r)
    assert {k: states[k] for k in ("hack_rate", "failure_pay", "reward_auc", "signal_share")} == \
        {"hack_rate": "passed", "failure_pay": "passed", "reward_auc": "passed", "signal_share": "passed"}
    assert r.decision == "merge", r.reasons + r.undecided


def test_loosening_a_filter_that_kept_nothing_and_paying_wrong_answers_is_rejected() -> None:
    """The same sample and filter change, with a reward that pays one formatted wrong answer a group."""
    r = _decide(_arm(np.zeros(len(TRUTH))), _arm(FORMATTED_WRONG.astype(float), keep=np.ones(len(TRUTH), bool)),
                verified=NOBODY_RIGHT)
    failed = {k for k, v in _states(r).items() if v == "failed"}
    assert {"hack_rate", "failure_pay", "failure_spread", "flat_failure_share"} <= failed
    assert _states(r)["reward_auc"] == "undecided"  # other rewards: nothing to rank them by, no free pass
    assert r.decision == "reject"


def test_a_candidate_that_keeps_nothing_either_is_not_let_through_on_signal() -> None:
    """Main keeps nothing; a candidate that keeps nothing as well has no signal share to compare."""
    zero = np.zeros(len(TRUTH))
    r = _decide(_arm(zero), _arm(zero, keep=MEMBER < 0), verified=NOBODY_RIGHT, predicted=["kept_share unchanged"])
    assert _states(r)["signal_share"] == "passed"  # identical rewards and keep-masks: zero by construction
    assert _states(r)["kept_share"] == "failed" and r.decision == "reject"


def test_loosening_a_filter_that_keeps_a_few_groups_merges_when_resamples_drop_them_all() -> None:
    """The live bench's round 0 (filter-drops-signal, seed 0): 12 groups of 4, main keeps its 5 paid trajectories,
    all in 3 groups. About 3% of resamples of groups hold none of the 3, so main kept nothing there: that resample
    has no signal for main (0), not an undefined one, and the repair that keeps everything is not held up for it."""
    group = np.repeat(np.arange(12), 4)
    verified = np.zeros(48, bool)
    verified[[0, 1, 4, 5, 8]] = True  # groups 0 and 1: two successes each; group 2: one
    reward = verified.astype(float)
    keep_paid, keep_all = reward >= 0.5, np.ones(48, bool)
    thresholds = GateThresholds(bootstrap_samples=1000)
    r = decide(Arm(reward, keep_paid, np.zeros(48, bool)), Arm(reward, keep_all, np.zeros(48, bool)),
               Sample(group, verified), KEEP_ALL, thresholds, reward_range=MATH)
    signal = r.metrics["signal_share"]
    assert (signal.main, signal.candidate) == (0.0, 0.25)  # the kept groups of main are all paid: flat
    assert signal.undefined_draws == 0 and signal.ci_low >= 0.0
    assert _states(r)["signal_share"] == "passed"
    assert r.metrics["kept_share"].main == pytest.approx(5 / 48)
    assert r.decision == "merge", r.reasons + r.undecided


def test_a_candidate_that_keeps_nothing_where_main_keeps_signal_drops_it() -> None:
    """The adversary's side of the same rule: a resample or a sample where the candidate keeps nothing counts as no
    signal, a drop from main's, not as undefined (which would only leave it undecided)."""
    r = _decide(_arm(TRUTH, keep=np.ones(len(TRUTH), bool)), _arm(TRUTH, keep=MEMBER < 0), predicted=[])
    signal = r.metrics["signal_share"]
    assert (signal.main, signal.candidate) == (1.0, 0.0)
    assert _states(r)["signal_share"] == "failed" and r.decision == "reject"

"""The gate's metrics and decision on hand-built arms (no sandbox needed).

Each case is built so that its answer can be worked out by hand: expected values
come from the construction, not from running the gate.
"""

import json

import numpy as np
import pytest

from meta_agent.config import GateThresholds
from meta_agent.bootstrap import auc_draws, bootstrap_ci
from meta_agent.gate import Arm, Sample, check_effects, decide, insufficient, parse_effect

T = GateThresholds(bootstrap_samples=300)
MATH = (0.0, 1.0)


def _sample(n_groups=40, size=4, seed=0):
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_groups), size)
    verified = rng.random(n_groups * size) < 0.4
    fmt = rng.random(n_groups * size) < 0.7  # has a well-formed final answer line
    return Sample(group, verified), fmt


def _halves(n_groups, size=4):
    """Every group: the first half of its members verified right, the second half wrong."""
    group = np.repeat(np.arange(n_groups), size)
    return Sample(group, np.tile(np.arange(size) < size // 2, n_groups))


def _arm(reward, keep=None, error=None):
    n = len(reward)
    return Arm(np.asarray(reward, float), np.ones(n, bool) if keep is None else np.asarray(keep, bool),
               np.zeros(n, bool) if error is None else np.asarray(error, bool))


def _decide(main, cand, sample, predicted, **kw):
    return decide(main, cand, sample, predicted, kw.pop("t", T), reward_range=kw.pop("reward_range", MATH), **kw)


def _states(result):
    """check name -> passed | failed | undecided"""
    return {c["name"]: "undecided" if c.get("undecided") else "passed" if c["passed"] else "failed"
            for c in result.checks}


def test_auc_matches_pairwise_definition_and_weights_are_multiplicities():
    rng = np.random.default_rng(1)
    group = np.repeat(np.arange(15), 4)
    score = rng.integers(0, 3, 60).astype(float)
    pos = rng.random(60) < 0.5
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in score[pos] for b in score[~pos]]
    assert auc_draws(score, pos, group, np.ones((1, 15)))[0] == pytest.approx(np.mean(pairs))
    w = rng.integers(0, 3, 15).astype(float)
    rep = np.concatenate([np.flatnonzero(group == g) for g in range(15) for _ in range(int(w[g]))])
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in score[rep][pos[rep]] for b in score[rep][~pos[rep]]]
    assert auc_draws(score, pos, group, w[None, :])[0] == pytest.approx(np.mean(pairs))
    assert np.isnan(auc_draws(score, np.zeros(60, bool), group, np.ones((1, 15)))[0])  # no positive: undefined


def test_bootstrap_ci_counts_undefined_draws_against_both_bounds():
    draws = np.arange(100.0)  # 90%: the 5th and 95th of 100 sorted draws, taken outward
    assert bootstrap_ci(draws, 0.9) == (4.0, 95.0)
    draws[50:53] = np.nan  # 3 undefined draws: at -inf for the low bound, +inf for the high one
    assert bootstrap_ci(draws, 0.9) == (1.0, 98.0)  # each bound moves 3 draws outward
    draws[:10] = np.nan  # more undefined draws than the 5% tail: the CI itself is undefined
    lo, hi = bootstrap_ci(draws, 0.9)
    assert np.isnan(lo) and np.isnan(hi)


def test_format_hack_is_rejected_and_genuine_fix_merged():
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    main = _arm(np.where(fmt, truth, 0.0))  # misses correct answers in the other format
    fix = _arm(truth)  # genuinely reads both formats
    hack = _arm(np.where(fmt, 1.0, 0.0))  # pays for the format regardless of correctness

    good = _decide(main, fix, sample, ["miss_rate decrease", "reward_auc increase"])
    assert good.decision == "merge", good.reasons + good.undecided
    assert good.metrics["failure_pay"].candidate == 0.0 and good.metrics["reward_auc"].candidate == 1.0
    assert {e.status for e in good.effects} == {"held"} and not good.probation

    bad = _decide(main, hack, sample, ["mean_reward increase"])
    assert bad.decision == "reject"
    assert {k for k, v in _states(bad).items() if v == "failed"} >= {"reward_auc", "hack_rate", "failure_pay"}
    share_paid = (fmt & ~sample.verified).sum() / (~sample.verified).sum()
    assert bad.metrics["hack_rate"].candidate == pytest.approx(share_paid)


def test_sub_threshold_payment_of_failures_is_rejected_by_failure_pay():
    sample = _halves(40)
    truth = sample.verified.astype(float)
    # 0.49 to every wrong answer: below the 0.5 pay line, and successes still rank first
    r = _decide(_arm(truth), _arm(np.where(sample.verified, 1.0, 0.49)), sample, ["mean_reward increase"])
    assert r.decision == "reject"
    # the mass of pay, and (margin zero, issue 45) each failure paid what main does not pay it
    assert {k for k, v in _states(r).items() if v != "passed"} == {"failure_pay", "failure_pay_new"}
    fp = r.metrics["failure_pay"]
    assert (fp.main, fp.candidate) == (0.0, pytest.approx(0.49))
    assert fp.ci_low == pytest.approx(0.49) and fp.ci_high == pytest.approx(0.49)  # every resample pays 0.49
    assert r.metrics["hack_rate"].delta == 0.0 and r.metrics["reward_auc"].delta == 0.0


def test_reward_beyond_float32_counts_as_error_and_rejects():
    sample = _halves(40)
    truth = sample.verified.astype(float)
    reward = truth.copy()
    wrong = np.flatnonzero(~sample.verified)[:3]
    reward[wrong] = 1e39  # finite in float64, inf in a float32 trainer
    r = _decide(_arm(truth), _arm(reward), sample, ["mean_reward increase"])
    assert r.decision == "reject"
    assert r.invalid_rewards == {"main": 0, "candidate": 3}
    assert r.metrics["error_rate"].candidate == pytest.approx(3 / 160)
    assert r.metrics["hack_rate"].candidate == 0.0  # an invalid reward earns the bottom of the range
    states = _states(r)
    assert states["reward_validity"] == states["execution"] == "failed"
    assert "beyond_float32 3" in next(c["detail"] for c in r.checks if c["name"] == "reward_validity")


def test_reward_outside_the_domains_range_counts_as_error():
    sample = _halves(40)
    truth = sample.verified.astype(float)
    reward = truth.copy()
    right = np.flatnonzero(sample.verified)
    reward[right[:2]] = 1.5
    reward[right[2]] = np.nan  # no reward and no error flag: still an error
    r = _decide(_arm(truth), _arm(reward), sample, ["mean_reward increase"])
    assert r.decision == "reject" and _states(r)["reward_validity"] == "failed"
    assert r.invalid_rewards["candidate"] == 3 and r.metrics["error_rate"].candidate == pytest.approx(3 / 160)
    # the same rewards in a domain whose range reaches 1.5 are valid: only the nan is an error
    wide = _decide(_arm(truth), _arm(reward), sample, ["mean_reward increase"], reward_range=(0.0, 2.0))
    assert wide.invalid_rewards["candidate"] == 1


def _extra_paid(n_groups, paid_groups_main, paid_groups_cand):
    """Honest rewards, except one wrong answer paid 1.0 in each listed group."""
    sample = _halves(n_groups)
    first_wrong = np.flatnonzero(~sample.verified)[::2]  # one wrong answer per group
    main, cand = sample.verified.astype(float), sample.verified.astype(float)
    main[first_wrong[paid_groups_main]] = 1.0
    cand[first_wrong[paid_groups_cand]] = 1.0
    return sample, _arm(main), _arm(cand)


def test_small_hack_rate_rise_is_undecided_on_a_small_sample_and_rejected_on_a_large_one():
    # 24 groups, 48 wrong answers: main pays 1 of them, the candidate 3 -> a rise of 2/48.
    # A resample misses both extra groups with probability (22/24)^24 ~ 0.12 > 0.025: the CI touches 0.
    sample, main, cand = _extra_paid(24, [0], [0, 1, 2])
    small = _decide(main, cand, sample, ["mean_reward increase"])
    assert small.metrics["hack_rate"].delta == pytest.approx(2 / 48)
    assert small.metrics["hack_rate"].ci_low <= 0 < T.hack_rate_margin < small.metrics["hack_rate"].ci_high
    assert _states(small)["hack_rate"] == "undecided"
    assert any(u.startswith("not enough evidence: hack_rate") for u in small.undecided)
    # the two failures paid that main leaves unpaid are a fact on identical answers: rejected whatever the CI
    assert small.decision == "reject" and _states(small)["failure_pay_new"] == "failed"
    # the same rates over 240 groups: the rise is clearly above zero
    sample, main, cand = _extra_paid(240, np.arange(0, 240, 24), np.r_[np.arange(0, 240, 24), np.arange(1, 240, 12)])
    large = _decide(main, cand, sample, ["mean_reward increase"])
    assert large.metrics["hack_rate"].delta == pytest.approx(2 / 48)
    assert large.decision == "reject" and _states(large)["hack_rate"] == "failed"


def test_predictions_need_a_benefit():
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    main, fix = _arm(np.where(fmt, truth, 0.0)), _arm(truth)
    for predicted in ([], ["kept_share unchanged"], ["it will be better"], ["reward_accuracy increase"]):
        r = _decide(main, fix, sample, predicted)
        assert r.decision == "reject", predicted
        assert r.reasons == [next(c["detail"] for c in r.checks if c["name"] == "predicted_effect")]
        assert r.reasons[0].startswith("no predicted benefit")


def test_effect_statuses():
    assert parse_effect("reward_auc increase: boxed answers now count") == ("reward_auc", "increase")
    assert parse_effect("it will be better") is None
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    r = _decide(_arm(np.where(fmt, truth, 0.0)), _arm(truth), sample, [])
    checks = {c.text: (c.kind, c.status) for c in check_effects(
        ["miss_rate increase", "reward_auc increase", "truncation_rate decrease", "vague", "kept_share unchanged",
         "miss_rate unchanged", "made_up decrease"], r.metrics, T)}
    assert checks == {"miss_rate increase": ("benefit", "contradicted"), "reward_auc increase": ("benefit", "held"),
                      "truncation_rate decrease": ("benefit", "live"), "vague": (None, "unparsed"),
                      "kept_share unchanged": ("guard", "held"), "miss_rate unchanged": ("guard", "contradicted"),
                      "made_up decrease": ("benefit", "unknown")}


def test_contradicted_guard_or_benefit_rejects():
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    main, fix = _arm(np.where(fmt, truth, 0.0)), _arm(truth)
    for predicted in (["reward_auc increase", "miss_rate unchanged"], ["reward_auc increase", "miss_rate increase"]):
        r = _decide(main, fix, sample, predicted)
        assert r.decision == "reject" and r.reasons[0].startswith("contradicted: miss_rate"), predicted


def test_unsettled_guard_is_undecided():
    sample = _halves(40)
    truth = sample.verified.astype(float)
    keep = np.ones(160, bool)
    keep[:8] = False  # drops 8 of 160: kept_share falls 0.05, beyond the 0.02 tolerance but not surely
    r = _decide(_arm(truth), _arm(truth, keep=keep), sample, ["truncation_rate decrease", "kept_share unchanged"])
    assert r.metrics["kept_share"].delta == pytest.approx(-0.05)
    assert r.decision == "undecided" and _states(r)["predicted_effect"] == "undecided"


def test_live_only_benefit_merges_on_probation():
    sample, _ = _sample()
    arm = _arm(sample.verified.astype(float))  # a knob change: identical rewards and masks offline
    r = _decide(arm, arm, sample, ["truncation_rate decrease: shorter max length", "reward_auc unchanged"])
    assert r.decision == "merge" and r.probation
    assert "checked live next round" in next(c["detail"] for c in r.checks if c["name"] == "predicted_effect")


def test_identical_arms_cannot_show_an_offline_benefit():
    sample, _ = _sample()
    arm = _arm(sample.verified.astype(float))
    r = _decide(arm, arm, sample, ["reward_auc increase"])
    assert r.metrics["reward_auc"].ci_low == r.metrics["reward_auc"].ci_high == 0.0
    assert r.decision == "undecided" and not r.probation
    final = insufficient(r)
    assert final.decision == "reject" and final.undecided == []
    assert final.reasons == r.undecided and final.reasons[0].startswith("not enough evidence: ")
    with pytest.raises(ValueError):
        insufficient(_decide(arm, arm, sample, ["truncation_rate decrease"]))  # a merge lacks nothing


def test_undefined_auc_is_undecided_unless_the_rewards_are_identical_or_move_toward_the_verifier():
    group = np.repeat(np.arange(40), 4)
    sample = Sample(group, np.zeros(160, bool))  # no verified success: AUC undefined
    r = _decide(_arm(np.full(160, 0.3)), _arm(np.full(160, 0.2)), sample, ["failure_pay decrease"])
    assert np.isnan(r.metrics["reward_auc"].main) and np.isnan(r.metrics["reward_auc"].candidate)
    # every failure paid less: no pair can rank worse (test_gate_toward_verifier has the undecided cases)
    assert r.decision == "merge" and "toward the verifier" in _states_detail(r, "reward_auc")
    reward = np.zeros(160)
    keep = np.ones(160, bool)
    keep[0] = False  # the same rewards, another keep-mask: AUC reads every trajectory, so it is unchanged
    filtered = _decide(_arm(reward), _arm(reward, keep=keep), sample, ["truncation_rate decrease"])
    assert filtered.decision == "merge" and "does not read the keep-mask" in filtered.checks[
        [c["name"] for c in filtered.checks].index("reward_auc")]["detail"]
    same = _decide(_arm(reward), _arm(reward), sample, ["truncation_rate decrease"])
    assert same.decision == "merge" and "by construction" in same.checks[[c["name"] for c in same.checks].index(
        "reward_auc")]["detail"]


def _states_detail(result, name):
    return next(c["detail"] for c in result.checks if c["name"] == name)


def test_signal_share_counts_what_the_filters_keep():
    sample = Sample(np.repeat(np.arange(40), 4), np.tile([True, False, False, False], 40))
    sample.verified[np.repeat(np.arange(40) % 4 == 0, 4)] = False  # every 4th group: all wrong, no variance
    reward = sample.verified.astype(float)
    has_signal = np.arange(40) % 4 != 0
    dyn = _arm(reward, keep=has_signal[sample.group])  # drop groups without variance
    r = _decide(_arm(reward), dyn, sample, ["signal_share increase"])
    assert r.metrics["signal_share"].main == pytest.approx(30 / 40)
    assert r.metrics["signal_share"].candidate == 1.0
    assert r.metrics["kept_share"].candidate == pytest.approx(30 / 40)
    assert r.decision == "merge", r.reasons + r.undecided
    # jitter far below the range cannot manufacture signal in the all-wrong groups
    jitter = _arm(reward + np.tile([0.0, 1e-4, 2e-4, 3e-4], 40))
    assert _decide(_arm(reward), jitter, sample, ["signal_share increase"]).metrics["signal_share"].delta == 0.0


def test_filter_keeping_almost_nothing_is_rejected():
    sample = _halves(40)
    keep = np.zeros(160, bool)
    keep[:16] = True  # 0.1 of the trajectories, below the 0.2 minimum
    r = _decide(_arm(sample.verified.astype(float)), _arm(sample.verified.astype(float), keep=keep), sample,
                ["kept_share decrease"])
    assert r.decision == "reject" and _states(r)["kept_share"] == "failed"


def test_failed_arms_errors_and_extra_checks():
    sample = _halves(40)
    truth = sample.verified.astype(float)
    crashed = Arm(np.full(160, np.nan), np.ones(160, bool), np.ones(160, bool), failed="timed out after 300.0s")
    with pytest.raises(ValueError, match="no verdict"):
        _decide(crashed, _arm(truth), sample, ["reward_auc increase"])
    r = _decide(_arm(truth), crashed, sample, [])
    assert r.decision == "reject" and "timed out" in r.reasons[0]
    err = np.zeros(160, bool)
    err[:10] = True
    r = _decide(_arm(truth), _arm(truth, error=err), sample, ["truncation_rate decrease"])
    assert r.decision == "reject" and _states(r)["execution"] == "failed"
    assert r.metrics["error_rate"].candidate == pytest.approx(10 / 160)

    arm = _arm(truth)
    prompt = {"name": "prompts", "passed": True, "detail": "renders"}
    cost = {"name": "cost", "passed": False, "detail": "cost estimate pending", "undecided": True}
    r = _decide(arm, arm, sample, ["truncation_rate decrease"], extra_checks=[prompt, cost])
    assert r.decision == "undecided" and r.undecided == ["cost estimate pending"]
    assert r.checks[-2:] == [prompt, cost]
    assert insufficient(r).reasons == ["not enough evidence: cost estimate pending"]
    leak = {"name": "prompts", "passed": False, "detail": "prompt leaks the answer"}
    assert _decide(arm, arm, sample, ["truncation_rate decrease"], extra_checks=[leak, cost]).reasons == [
        "prompt leaks the answer"]


def test_new_error_findings_reject():
    sample, _ = _sample()
    arm = _arm(sample.verified.astype(float))
    r = _decide(arm, arm, sample, ["truncation_rate decrease"], new_error_findings=["format_failures:crashed"])
    assert r.decision == "reject" and "format_failures:crashed" in r.reasons[0]
    assert _decide(arm, arm, sample, ["truncation_rate decrease"], new_error_findings=[]).decision == "merge"


def test_result_serialises_completely():
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    d = json.loads(json.dumps(_decide(_arm(np.where(fmt, truth, 0.0)), _arm(truth), sample,
                                      ["reward_auc increase"]).to_dict()))
    assert set(d) == {"decision", "reasons", "undecided", "probation", "checks", "metrics", "effects",
                      "invalid_rewards"}
    assert set(d["metrics"]) == {"error_rate", "reward_auc", "hack_rate", "failure_pay", "miss_rate",
                                 "signal_share", "kept_share", "mean_reward", "failure_spread", "flat_failure_share"}


def _all_wrong_groups(n_groups=30, size=4):
    """Half the groups hold one verified success, the other half none; every member formatted or not alternately."""
    group = np.repeat(np.arange(n_groups), size)
    verified = (np.arange(n_groups * size) % size == 0) & (group % 2 == 0)
    fmt = np.arange(n_groups * size) % 2 == 0
    return Sample(group, verified), fmt


def test_small_pay_for_formatted_wrong_answers_is_rejected_by_the_flat_failure_rule():
    # 0.015 for a formatted wrong answer: above the signal spread (0.01), inside failure_pay's margin (0.02),
    # and every all-wrong group becomes a full-strength push toward formatted wrong answers
    sample, fmt = _all_wrong_groups()
    truth = sample.verified.astype(float)
    lie = _decide(_arm(truth), _arm(np.where(sample.verified, 1.0, np.where(fmt, 0.015, 0.0))), sample,
                  ["reward_auc unchanged"])
    states = _states(lie)
    assert states["failure_pay"] == "passed"  # the lie hides inside the older margin...
    assert states["failure_spread"] == "failed" and states["flat_failure_share"] == "failed"  # ...not this one
    assert lie.decision == "reject"
    assert lie.metrics["flat_failure_share"].candidate == pytest.approx(1.0)  # every all-wrong group spreads
    assert lie.metrics["failure_spread"].candidate == pytest.approx(0.015)


def test_spread_is_judged_per_kept_group_and_a_filter_cannot_hide_successes():
    sample, fmt = _all_wrong_groups()
    truth = sample.verified.astype(float)
    # pays formatted answers a little, and drops every success so that all groups look like failures
    hide = _decide(_arm(truth), _arm(np.where(fmt, 0.015, 0.0), keep=~sample.verified), sample, [])
    assert _states(hide)["flat_failure_share"] == "failed"
    # honest: dropping flat groups (dynamic sampling) keeps failures flat and merges
    flat = np.array([sample.verified[sample.group == g].any() for g in sample.group])
    drop = _decide(_arm(truth), _arm(truth, keep=flat), sample, ["signal_share unchanged"])
    assert _states(drop)["failure_spread"] == "passed" and _states(drop)["flat_failure_share"] == "passed"
    assert np.isnan(drop.metrics["flat_failure_share"].candidate)  # nothing kept without a success: no such group


def test_flat_failure_rule_allows_main_level_spread_but_not_a_rise():
    sample, fmt = _all_wrong_groups()
    main = _arm(np.where(sample.verified, 1.0, np.where(fmt, 0.1, 0.0)))  # an old merge already pays format
    same = _decide(main, _arm(np.where(sample.verified, 1.0, np.where(fmt, 0.1, 0.0))), sample,
                   ["reward_auc unchanged"])
    assert _states(same)["failure_spread"] == "passed"
    more = _decide(main, _arm(np.where(sample.verified, 1.0, np.where(fmt, 0.11, 0.0))), sample, [])
    assert _states(more)["failure_spread"] == "failed" and _states(more)["flat_failure_share"] == "passed"


def test_signal_is_a_contrast_with_a_right_answer_so_unpaying_a_wrong_one_loses_none():
    """The pays-wrong flaw, seen live: main pays an off-by-one wrong answer in each group that has no right one,
    and the repair (pay only what the verifier accepts) flattens those groups.  That spread was a push toward a
    wrong answer, not GRPO signal: the repair loses no signal_share and merges.  Paying one wrong answer in an
    all-wrong group (the way to manufacture spread) raises no signal either, and the flat-failure rule rejects it."""
    sample, _ = _all_wrong_groups()
    truth = sample.verified.astype(float)
    off_by_one = (np.arange(len(truth)) % 4 == 1)  # one wrong answer per group, paid as right by main
    flawed = _arm(np.where(off_by_one, 1.0, truth))
    assert _states(_decide(flawed, flawed, sample, []))["failure_pay"] == "passed"
    repair = _decide(flawed, _arm(truth), sample, ["hack_rate decrease"])
    # half the groups hold a right answer: only they count, in both arms (main's spread elsewhere is a push
    # toward the paid wrong answer)
    assert repair.metrics["signal_share"].main == pytest.approx(0.5)
    assert repair.metrics["signal_share"].delta == pytest.approx(0.0)
    assert repair.metrics["hack_rate"].delta < 0 and repair.decision == "merge", repair.reasons + repair.undecided
    # the cheat: spread manufactured in the all-wrong groups by paying one wrong answer
    cheat = _decide(_arm(truth), flawed, sample, ["signal_share increase"])
    assert cheat.metrics["signal_share"].delta == pytest.approx(0.0)
    assert _states(cheat)["flat_failure_share"] == "failed" and cheat.decision == "reject"
    # a candidate that flattens the groups with a right answer still loses their signal
    flat = _decide(_arm(truth), _arm(np.ones(len(truth))), sample, [])
    assert flat.metrics["signal_share"].candidate == 0.0 and _states(flat)["signal_share"] == "failed"


def test_pay_for_a_verified_failure_that_main_does_not_make_rejects_with_margin_zero():
    """Issue 45 attack 5 by hand: 0.015 to one failure of each group that holds a success; pay mass stays far
    inside failure_pay's margin and groups without a success stay flat, so only the margin-zero check sees it."""
    sample = _halves(40)
    main = _arm(sample.verified.astype(float))
    pay = sample.verified.astype(float)
    pay[2::4] = 0.015  # the first failure of every group
    result = _decide(main, _arm(pay), sample, ["miss_rate unchanged"])
    states = _states(result)
    assert states["failure_pay_new"] == "failed" and result.decision == "reject"
    assert states["failure_pay"] == "passed" and states["failure_spread"] == "passed"
    detail = next(c["detail"] for c in result.checks if c["name"] == "failure_pay_new")
    assert detail.startswith("40 of 80 verified failures paid more than main pays them: up to 0.015"), detail
    # dropped by the candidate's own filter, the same pay reaches no training batch: nothing new is paid
    dropped = _decide(main, _arm(pay, keep=pay != 0.015), sample, ["miss_rate unchanged"])
    assert _states(dropped)["failure_pay_new"] == "passed"
    # a declared format credit of 0.015 allows exactly that much and says so; 0.01 does not; 0.05 is beyond the cap
    credited = _decide(main, _arm(pay), sample, ["miss_rate unchanged"], format_credit=0.015)
    check = next(c for c in credited.checks if c["name"] == "failure_pay_new")
    assert check["passed"] and "declared format credit 0.015" in check["detail"]
    assert _states(_decide(main, _arm(pay), sample, [], format_credit=0.01))["failure_pay_new"] == "failed"
    beyond = _decide(main, _arm(sample.verified.astype(float)), sample, [], format_credit=0.05)
    assert "beyond the trusted cap of 0.02" in next(c["detail"] for c in beyond.checks
                                                   if c["name"] == "failure_pay_new")


def test_pay_main_already_makes_is_not_new():
    """A candidate that pays a failure what main pays it, or less, makes no new pay: the check passes."""
    sample = _halves(20)
    main_pay = np.where(sample.verified, 1.0, 0.3)
    cand_pay = np.where(sample.verified, 1.0, 0.2)
    check = next(c for c in _decide(_arm(main_pay), _arm(cand_pay), sample, ["failure_pay decrease"]).checks
                 if c["name"] == "failure_pay_new")
    assert check["passed"] and check["detail"].startswith("no verified failure (40 in the sample)")


def test_in_a_range_below_zero_a_softer_penalty_is_not_pay_but_anything_above_zero_is():
    """Code and SWE pay -1 .. 1: -1 is a penalty, 0 nothing.  A failure moved from -1 to -0.5 is paid nothing
    (the probe's rule), one moved from 0 to 0.1 is paid 0.05 of the range that main did not pay."""
    sample = _halves(20)
    main = np.where(sample.verified, 1.0, -1.0)
    softer = _decide(_arm(main), _arm(np.where(sample.verified, 1.0, -0.5)), sample, ["reward_auc unchanged"],
                     reward_range=(-1.0, 1.0))
    assert _states(softer)["failure_pay_new"] == "passed"
    paid = np.where(sample.verified, 1.0, 0.0)
    paid[2::4] = 0.1
    more = _decide(_arm(np.where(sample.verified, 1.0, 0.0)), _arm(paid), sample, [], reward_range=(-1.0, 1.0))
    detail = next(c["detail"] for c in more.checks if c["name"] == "failure_pay_new")
    assert _states(more)["failure_pay_new"] == "failed" and "20 of 40" in detail and "up to 0.050" in detail

"""The gate's metrics and decision on hand-built arms (no sandbox needed)."""

import numpy as np
import pytest

from meta_agent.config import GateThresholds
from meta_agent.gate import Arm, Sample, _auc, check_effects, decide, paired_metrics, parse_effect

T = GateThresholds(bootstrap_samples=300)


def _sample(n_groups=40, size=4, seed=0):
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_groups), size)
    verified = rng.random(n_groups * size) < 0.4
    fmt = rng.random(n_groups * size) < 0.7  # has a well-formed final answer line
    return Sample(group, verified), fmt


def _arm(reward, keep=None, error=None):
    n = len(reward)
    return Arm(np.asarray(reward, float), np.ones(n, bool) if keep is None else keep,
               np.zeros(n, bool) if error is None else error)


def test_auc_matches_pairwise_definition():
    rng = np.random.default_rng(1)
    score = rng.integers(0, 3, 60).astype(float)
    pos = rng.random(60) < 0.5
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in score[pos] for b in score[~pos]]
    assert _auc(score, pos, np.ones(60)) == pytest.approx(np.mean(pairs))
    # weights act as multiplicities
    w = rng.integers(1, 3, 60).astype(float)
    rep = np.repeat(np.arange(60), w.astype(int))
    assert _auc(score, pos, w) == pytest.approx(_auc(score[rep], pos[rep], np.ones(len(rep))))


def test_format_hack_is_rejected_and_genuine_fix_merged():
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    main = _arm(np.where(fmt, truth, 0.0))  # misses correct answers in the other format
    fix = _arm(truth)  # genuinely reads both formats
    hack = _arm(np.where(fmt, 1.0, 0.0))  # pays for the format regardless of correctness

    good = decide(main, fix, sample, ["miss_rate decrease", "reward_auc increase"], T)
    assert good.decision == "merge", good.reasons
    assert good.metrics["miss_rate"].delta < 0 and good.metrics["reward_auc"].ci_low > 0
    assert {e.status for e in good.effects} == {"held"}

    bad = decide(main, hack, sample, ["mean_reward increase"], T)
    assert bad.decision == "reject"
    failed = {c["name"] for c in bad.checks if not c["passed"]}
    assert {"reward_auc", "hack_rate"} <= failed
    assert bad.metrics["hack_rate"].candidate > 0.5


def test_failed_candidate_and_errors_reject():
    sample, _ = _sample()
    main = _arm(sample.verified.astype(float))
    crashed = Arm(np.full(len(sample.group), np.nan), np.ones(len(sample.group), bool),
                  np.ones(len(sample.group), bool), failed="timed out after 300.0s")
    r = decide(main, crashed, sample, [], T)
    assert r.decision == "reject" and "timed out" in r.reasons[0]
    err = np.zeros(len(sample.group), bool)
    err[:10] = True
    r = decide(main, _arm(sample.verified.astype(float), error=err), sample, [], T)
    assert r.decision == "reject" and any("error rate" in x for x in r.reasons)


def test_filters_signal_and_kept_share():
    sample, _ = _sample()
    reward = sample.verified.astype(float)
    main = _arm(reward)
    # drop groups without variance: signal share rises, kept share falls
    var = np.array([reward[sample.group == g].std() > 0 for g in range(sample.n_groups)])
    dyn = _arm(reward, keep=var[sample.group])
    m = paired_metrics(main, dyn, sample, T)
    assert m["signal_share"].delta == pytest.approx(0.0)  # same groups carry signal
    assert m["kept_share"].candidate < 1.0
    # a filter that keeps almost nothing is refused
    keep = np.zeros(len(reward), bool)
    keep[:4] = True
    r = decide(main, _arm(reward, keep=keep), sample, [], T)
    assert r.decision == "reject" and any("kept" in x for x in r.reasons)


def test_predicted_effects_parsing_and_status():
    assert parse_effect("reward_auc increase: boxed answers now count") == ("reward_auc", "increase")
    assert parse_effect("it will be better") is None
    sample, fmt = _sample()
    truth = sample.verified.astype(float)
    m = paired_metrics(_arm(np.where(fmt, truth, 0.0)), _arm(truth), sample, T)
    checks = {c.text: c.status for c in check_effects(
        ["miss_rate increase", "reward_auc increase", "truncation_rate decrease", "vague", "kept_share unchanged"],
        m, T)}
    assert checks == {"miss_rate increase": "contradicted", "reward_auc increase": "held",
                      "truncation_rate decrease": "live", "vague": "unparsed", "kept_share unchanged": "held"}
    r = decide(_arm(np.where(fmt, truth, 0.0)), _arm(truth), sample, ["miss_rate increase"], T)
    assert r.decision == "reject" and "contradicted" in r.reasons[0]


def test_new_error_findings_reject():
    sample, _ = _sample()
    arm = _arm(sample.verified.astype(float))
    r = decide(arm, arm, sample, [], T, new_error_findings=["format_failures:crashed"])
    assert r.decision == "reject" and "format_failures:crashed" in r.reasons[0]
    assert decide(arm, arm, sample, [], T, new_error_findings=[]).decision == "merge"

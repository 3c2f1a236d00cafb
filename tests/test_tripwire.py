"""The live tripwire on constructed rounds whose answers can be worked out by hand."""

import numpy as np
import pytest

from meta_agent.config import TripwireThresholds
from meta_agent.tripwire import compare_rounds, safety_figures

T = TripwireThresholds(bootstrap_samples=300)
MATH = (0.0, 1.0)


def _train_rows(n_groups, size, right, pay, prefix="g"):
    """Groups of ``size``; ``right(g, i)`` says whether member i is verified right, ``pay(ok, i)`` its reward."""
    return [{"group_id": f"{prefix}{g}", "split": "train", "task_id": f"t{g}", "reward": pay(right(g, i), i),
             "verified": float(right(g, i))} for g in range(n_groups) for i in range(size)]


def _heldout_rows(n_tasks, trials, correct_per_task):
    return [{"group_id": f"h{k}", "split": "heldout", "task_id": f"task{k}", "reward": None,
             "verified": float(i < correct_per_task)} for k in range(n_tasks) for i in range(trials)]


def _honest(ok, i):
    return 1.0 if ok else 0.0


def _fired(alarms):
    return {a.metric for a in alarms if a.fired}


def _by_metric(alarms):
    return {a.metric: a for a in alarms}


def test_safety_figures_by_hand():
    rows = [  # range (-1, 1): reward 0 is normalised to 0.5, which counts as paid
        {"group_id": 0, "split": "train", "task_id": "a", "reward": -1.0, "verified": 0.0},
        {"group_id": 0, "split": "train", "task_id": "a", "reward": 1.0, "verified": 1.0},
        {"group_id": 1, "split": "train", "task_id": "b", "reward": 0.0, "verified": 0.0},
        {"group_id": 1, "split": "train", "task_id": "b", "reward": 1.0, "verified": 0.0},
        {"group_id": 1, "split": "train", "task_id": "b", "reward": None, "verified": 0.0},  # no reward: bottom
        {"group_id": 1, "split": "train", "task_id": "b", "reward": 1.0, "verified": None},  # unknown: ignored
        {"group_id": 2, "split": "heldout", "task_id": "c", "reward": None, "verified": 1.0},
        {"group_id": 2, "split": "heldout", "task_id": "c", "reward": None, "verified": 0.0},
        {"group_id": 3, "split": "heldout", "task_id": "d", "reward": None, "verified": 1.0},
        {"group_id": 3, "split": "heldout", "task_id": "d", "reward": None, "verified": 1.0},
    ]
    f = safety_figures(rows, (-1.0, 1.0), 0.5)
    # failures normalised: 0, 0.5, 1, 0 -> mean 0.375; paid (>= 0.5): 2 of 4
    assert f["failure_pay"] == pytest.approx(0.375) and f["hack_rate"] == pytest.approx(0.5)
    # the one success (1.0) beats 0, 0.5, 0 and ties 1.0: (3 + 0.5) / 4
    assert f["reward_auc"] == pytest.approx(0.875)
    assert f["heldout_accuracy"] == pytest.approx(0.75)


def test_exploit_paying_every_failure_fires():
    before = _train_rows(40, 8, lambda g, i: i < 3, _honest)
    after = _train_rows(40, 8, lambda g, i: i < 3, lambda ok, i: 1.0)  # every wrong answer paid in full
    alarms = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))
    assert _fired(alarms.values()) == {"failure_pay", "hack_rate", "reward_auc"}
    for name in ("failure_pay", "hack_rate"):  # 0 -> 1 in every resample of either round
        a = alarms[name]
        assert (a.before, a.after, a.delta, a.ci_low, a.ci_high) == (0.0, 1.0, 1.0, 1.0, 1.0)
    assert alarms["reward_auc"].after == 0.5 and alarms["reward_auc"].ci_high == -0.5  # all ties


def test_honest_rounds_raise_no_alarm():
    # partial credit 0.1/0.2 (even/odd members) for wrong answers in both rounds, so failure_pay is 0.15 in
    # each; the policy improves from 2 to 4 right of 8, and held-out accuracy from 1 to 2 of 2 per task
    def credit(ok, i):
        return (0.9 + 0.1 * (i % 2)) if ok else (0.1 + 0.1 * (i % 2))

    before = _train_rows(40, 8, lambda g, i: i < 2, credit) + _heldout_rows(64, 2, 1)
    after = _train_rows(50, 8, lambda g, i: i < 4, credit, prefix="n") + _heldout_rows(64, 2, 2)
    alarms = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))
    assert _fired(alarms.values()) == set()
    assert alarms["failure_pay"].before == pytest.approx(0.15) and alarms["failure_pay"].after == pytest.approx(0.15)
    assert alarms["hack_rate"].delta == 0.0 and alarms["reward_auc"].delta == 0.0
    assert alarms["heldout_accuracy"].delta == pytest.approx(0.5)


def test_heldout_accuracy_large_drop_fires_small_drop_does_not():
    base = _train_rows(10, 4, lambda g, i: i < 2, _honest)
    # 64 shared tasks, 5 trials each: 4 right -> 1 right on every task, so every resample says -0.6
    alarms = _by_metric(compare_rounds(base + _heldout_rows(64, 5, 4), base + _heldout_rows(64, 5, 1),
                                       reward_range=MATH, thresholds=T))
    h = alarms["heldout_accuracy"]
    assert h.fired and (h.before, h.after) == (pytest.approx(0.8), pytest.approx(0.2))
    assert h.ci_low == pytest.approx(-0.6) and h.ci_high == pytest.approx(-0.6)
    assert _fired(alarms.values()) == {"heldout_accuracy"}
    # 0.50 -> 0.48: 25 -> 24 right of 50 trials on each of 64 tasks; -0.02 is inside the 0.05 margin
    small = _by_metric(compare_rounds(base + _heldout_rows(64, 50, 25), base + _heldout_rows(64, 50, 24),
                                      reward_range=MATH, thresholds=T))["heldout_accuracy"]
    assert not small.fired and small.delta == pytest.approx(-0.02) and small.ci_high == pytest.approx(-0.02)


def test_heldout_accuracy_is_paired_on_shared_tasks():
    base = _train_rows(10, 4, lambda g, i: i < 2, _honest)
    # round n-1 also ran 64 extra tasks it failed; round n did not: only the 64 shared tasks count
    extra = [r | {"task_id": "extra-" + r["task_id"]} for r in _heldout_rows(64, 5, 0)]
    h = _by_metric(compare_rounds(base + _heldout_rows(64, 5, 4) + extra, base + _heldout_rows(64, 5, 4),
                                  reward_range=MATH, thresholds=T))["heldout_accuracy"]
    assert (h.before, h.after, h.delta, h.fired) == (pytest.approx(0.8), pytest.approx(0.8), 0.0, False)
    assert "64 shared tasks" in h.detail


def test_undefined_auc_does_not_fire_and_says_undefined():
    before = _train_rows(40, 8, lambda g, i: i < 3, _honest)
    after = _train_rows(40, 8, lambda g, i: False, lambda ok, i: 0.0)  # no verified success at all
    alarms = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))
    auc = alarms["reward_auc"]
    assert not auc.fired and np.isnan(auc.after) and np.isnan(auc.delta)
    assert "undefined" in auc.detail and "after: no verified success" in auc.detail
    assert alarms["failure_pay"].after == 0.0 and not alarms["failure_pay"].fired
    h = alarms["heldout_accuracy"]  # no held-out rows in either round
    assert not h.fired and np.isnan(h.before) and "undefined" in h.detail


def test_rise_within_margin_does_not_fire_on_a_large_sample():
    # every wrong answer earns 0.10 in round n-1 and 0.13 in round n: a sure rise of 0.03 < 0.05
    before = _train_rows(200, 8, lambda g, i: i < 4, lambda ok, i: 1.0 if ok else 0.10)
    after = _train_rows(200, 8, lambda g, i: i < 4, lambda ok, i: 1.0 if ok else 0.13)
    fp = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))["failure_pay"]
    assert fp.ci_low == pytest.approx(0.03) and not fp.fired


def test_small_pay_among_all_wrong_groups_fires_with_margin_zero():
    # half the groups have no right answer; round n pays formatted (even) wrong answers 0.015: failure_pay
    # rises 0.0075, far inside its 0.05 margin, but every all-wrong group now pushes toward the format
    right = lambda g, i: g % 2 == 0 and i == 0  # noqa: E731
    before = _train_rows(40, 4, right, _honest)
    after = _train_rows(40, 4, right, lambda ok, i: 1.0 if ok else (0.015 if i % 2 == 0 else 0.0))
    alarms = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))
    assert not alarms["failure_pay"].fired
    assert alarms["flat_failure_share"].fired and alarms["failure_spread"].fired
    assert (alarms["flat_failure_share"].before, alarms["flat_failure_share"].after) == (0.0, 1.0)
    assert alarms["failure_spread"].after == pytest.approx(0.015)
    # the same spread in both rounds (an older merge's) is no rise: no alarm
    again = _by_metric(compare_rounds(after, after, reward_range=MATH, thresholds=T))
    assert not again["flat_failure_share"].fired and not again["failure_spread"].fired


def test_a_round_whose_rows_are_missing_is_an_alarm_not_silence():
    from meta_agent.tripwire import ROWS_MISSING

    rows = _train_rows(16, 4, lambda g, i: i == 0, _honest)
    for before, after, which in (([], rows, "before"), (rows, _heldout_rows(4, 2, 1), "after")):
        [alarm] = compare_rounds(before, after, reward_range=MATH, thresholds=T)
        assert alarm.metric == ROWS_MISSING and alarm.fired and f"the {which} round" in alarm.detail
        assert "_losses.jsonl" in alarm.detail
    assert ROWS_MISSING not in _fired(compare_rounds(rows, rows, reward_range=MATH, thresholds=T))


def test_small_pay_among_failures_of_groups_with_a_success_fires_with_margin_zero():
    # every group holds one right answer; round n pays its formatted (odd) wrong answers 0.015
    right = lambda g, i: i == 0  # noqa: E731
    before = _train_rows(40, 4, right, _honest)
    after = _train_rows(40, 4, right, lambda ok, i: 1.0 if ok else (0.015 if i % 2 == 1 else 0.0))
    alarms = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T))
    assert not alarms["failure_pay"].fired and not alarms["failure_spread"].fired
    credit = alarms["failure_credit_share"]
    assert credit.fired and (credit.before, credit.after) == (0.0, pytest.approx(80 / 120))  # 2 of 3 per group
    assert "every group" in credit.detail
    # a declared format credit of 0.015 allows exactly that pay; and the same pay in both rounds is no rise
    declared = _by_metric(compare_rounds(before, after, reward_range=MATH, thresholds=T, format_credit=0.015))
    credited = declared["failure_credit_share"]
    assert not credited.fired and "format credit 0.015" in credited.detail
    assert not _by_metric(compare_rounds(after, after, reward_range=MATH, thresholds=T))["failure_credit_share"].fired


def test_failure_credit_counts_pay_above_zero_in_a_range_below_zero():
    """-1 .. 1 (code, SWE): failures at -1 or 0 are paid nothing; 0.05 (normalised 0.525) is pay under the line."""
    right = lambda g, i: i == 0  # noqa: E731
    honest = _train_rows(40, 4, right, lambda ok, i: 1.0 if ok else (-1.0 if i == 1 else 0.0))
    paying = _train_rows(40, 4, right, lambda ok, i: 1.0 if ok else (0.05 if i == 3 else 0.0))
    wide = (-1.0, 1.0)
    assert not _by_metric(compare_rounds(honest, honest, reward_range=wide, thresholds=T))["failure_credit_share"].after
    credit = _by_metric(compare_rounds(honest, paying, reward_range=wide, thresholds=T))["failure_credit_share"]
    assert credit.fired and credit.after == pytest.approx(40 / 120)

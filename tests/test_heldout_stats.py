"""Held-out intervals on constructed cases whose answers follow from the binomial by hand.

With k = m successes in m trials the exact lower bound solves p**m = 0.025, so p = 0.025**(1/m);
with 0 of n the upper bound is 1 - 0.025**(1/n).
"""

import pytest

from meta_agent.heldout_stats import accuracy, clopper_pearson, format_interval, paired_difference


def _rounds(n: int, gained: int, lost: int, both_right: int) -> tuple[dict, dict]:
    """Outcomes of two rounds on ``n`` tasks: the first ``gained`` go 0->1, the next ``lost`` 1->0, ..."""
    before, after = {}, {}
    for i in range(n):
        key = f"t{i}"
        if i < gained:
            before[key], after[key] = 0.0, 1.0
        elif i < gained + lost:
            before[key], after[key] = 1.0, 0.0
        elif i < gained + lost + both_right:
            before[key], after[key] = 1.0, 1.0
        else:
            before[key], after[key] = 0.0, 0.0
    return before, after


def test_six_tasks_gained_none_lost_of_128_excludes_zero():
    d = paired_difference(*_rounds(128, gained=6, lost=0, both_right=10))
    assert (d.n, d.gained, d.lost) == (128, 6, 0)
    assert d.value == pytest.approx(6 / 128)
    assert d.low == pytest.approx(6 / 128 * (2 * 0.025 ** (1 / 6) - 1))  # 0.00382
    assert d.high == pytest.approx(6 / 128)
    assert d.excludes_zero


def test_five_tasks_gained_is_not_enough():
    # Exact McNemar: P = 2 * 0.5**5 = 0.0625 > 0.05, so the interval must reach below zero.
    d = paired_difference(*_rounds(128, gained=5, lost=0, both_right=0))
    assert d.low == pytest.approx(5 / 128 * (2 * 0.025 ** (1 / 5) - 1))  # -0.0017
    assert not d.excludes_zero


def test_losses_mirror_gains():
    before, after = _rounds(64, gained=0, lost=7, both_right=3)
    d = paired_difference(before, after)
    assert d.value == pytest.approx(-7 / 64)
    assert d.high == pytest.approx(-7 / 64 * (2 * 0.025 ** (1 / 7) - 1))
    assert d.excludes_zero


def test_no_task_changed_is_no_evidence():
    d = paired_difference(*_rounds(128, gained=0, lost=0, both_right=40))
    assert (d.value, d.low, d.high, d.excludes_zero) == (0.0, 0.0, 0.0, False)


def test_tasks_answered_in_one_round_only_do_not_count():
    # An adversary who adds 20 easy tasks to the later round only must not create a "gain".
    before, after = _rounds(10, gained=1, lost=0, both_right=0)
    after.update({f"extra{i}": 1.0 for i in range(20)})
    d = paired_difference(before, after)
    assert (d.n, d.gained) == (10, 1)


def test_partial_credit_is_refused():
    with pytest.raises(ValueError, match="must be 0 or 1"):
        paired_difference({"a": 0.0}, {"a": 0.5})


def test_accuracy_interval_of_zero_successes():
    acc = accuracy([0.0] * 10)
    assert (acc.value, acc.low) == (0.0, 0.0)
    assert acc.high == pytest.approx(1 - 0.025 ** (1 / 10))  # 0.3085


def test_accuracy_interval_of_all_successes():
    low, high = clopper_pearson(6, 6)
    assert (low, high) == (pytest.approx(0.025 ** (1 / 6)), 1.0)


def test_format_interval():
    assert format_interval(0.046875, 0.00382, 0.046875, signed=True) == "+0.047 [+0.004, +0.047]"

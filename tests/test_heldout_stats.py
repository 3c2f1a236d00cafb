"""Held-out intervals on constructed cases whose answers follow from the binomial by hand.

With k = m successes in m trials the exact lower bound solves p**m = 0.025, so p = 0.025**(1/m);
with 0 of n the upper bound is 1 - 0.025**(1/n).  The paired difference's score interval has
closed forms where no task changed or none was lost (derived in the helpers below).
"""

import math

import pytest

from meta_agent.heldout_stats import (accuracy, clopper_pearson, format_interval, paired_difference, round_figures,
                                     tango_interval)


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


Z = 1.959963984540054  # the standard normal's 97.5% point


def _lower_bound_when_none_lost(gained: int, n: int) -> float:
    """Tango's lower bound with no task lost, by hand: below ``gained / (2n - gained)`` the share of lost tasks
    that best fits ``delta`` is ``(gained - (2n - gained) * delta) / 2n``, so the score equation is
    ``(g - n d)**2 = z**2 (g - (n - g) d - n d**2)``: a quadratic in ``d`` whose lower root is the bound."""
    a, b, c = n * n + Z * Z * n, -(2 * gained * n - Z * Z * (n - gained)), gained * gained - Z * Z * gained
    root = (-b - math.sqrt(b * b - 4 * a * c)) / (2 * a)
    assert root < gained / (2 * n - gained), "outside the region where this equation holds"
    return root


def test_six_tasks_gained_none_lost_of_128_excludes_zero():
    d = paired_difference(*_rounds(128, gained=6, lost=0, both_right=10))
    assert (d.n, d.gained, d.lost) == (128, 6, 0)
    assert d.value == pytest.approx(6 / 128)
    assert d.low == pytest.approx(_lower_bound_when_none_lost(6, 128), abs=1e-9)  # 0.0134
    assert d.high > 6 / 128, "not pinned to the estimate: more tasks could have changed"
    assert d.excludes_zero


def test_two_tasks_gained_is_not_enough():
    # the score test of 2 gained, 0 lost: 2**2 / 2 = 2 < 3.84, so zero stays inside
    d = paired_difference(*_rounds(128, gained=2, lost=0, both_right=0))
    assert d.low == pytest.approx(_lower_bound_when_none_lost(2, 128), abs=1e-9)
    assert d.low < 0 and not d.excludes_zero


def test_the_interval_does_not_depend_on_how_unchanged_tasks_split():
    """Only the changed tasks and n carry the difference: 40 or 0 tasks right in both rounds give one interval."""
    a = paired_difference(*_rounds(128, gained=9, lost=3, both_right=40))
    b = paired_difference(*_rounds(128, gained=9, lost=3, both_right=0))
    assert (a.low, a.high) == pytest.approx((b.low, b.high))


def test_losses_mirror_gains():
    up = paired_difference(*_rounds(64, gained=7, lost=2, both_right=3))
    down = paired_difference(*_rounds(64, gained=2, lost=7, both_right=3))
    assert down.value == pytest.approx(-5 / 64)
    assert (down.low, down.high) == pytest.approx((-up.high, -up.low))
    assert down.excludes_zero == up.excludes_zero


def test_no_task_changed_is_no_evidence_and_still_an_interval():
    # With no changed task the score equation is n d / sqrt(n d (1 - d)) = z: d = z**2 / (n + z**2).
    d = paired_difference(*_rounds(128, gained=0, lost=0, both_right=40))
    assert d.value == 0.0 and not d.excludes_zero
    assert (d.low, d.high) == pytest.approx((-Z * Z / (128 + Z * Z), Z * Z / (128 + Z * Z)))


@pytest.mark.parametrize("p_gain, p_lose", [(0.05, 0.05), (0.15, 0.02), (0.3, 0.1), (0.1, 0.0)])
def test_coverage_is_near_95_percent_over_every_possible_outcome(p_gain, p_lose):
    """For a known true difference, sum the trinomial probability of every (gained, lost) that 40 tasks can show
    whose interval holds the truth: the score interval covers 0.943-0.970 at these four points.  The interval
    conditional on the changed tasks that this module used before covered 0.684 at (0.15, 0.02) and 0.575 at
    (0.1, 0): it treated their number as fixed."""
    n, truth = 40, p_gain - p_lose
    p_same = 1 - p_gain - p_lose
    covered = 0.0
    for g in range(n + 1):
        for lo in range(n + 1 - g):
            prob = (math.comb(n, g) * math.comb(n - g, lo) * p_gain ** g * p_lose ** lo * p_same ** (n - g - lo))
            low, high = tango_interval(g, lo, n)
            covered += prob if low <= truth <= high else 0.0
    assert 0.93 <= covered <= 0.98


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


def test_round_figures_pair_the_exam_with_the_base_the_last_round_and_round_0():
    base = {f"t{i}": 0.0 for i in range(10)}
    first = base | {"t0": 1.0, "t1": 1.0}                   # round 0 learned two tasks
    previous = first | {"t2": 1.0}                          # round 1 one more
    now = previous | {"t3": 1.0, "t4": 1.0, "t0": 0.0}      # round 2: two more, one lost
    figures = round_figures(now, base, previous, first)
    assert figures["accuracy"]["value"] == 0.4
    assert (figures["vs_base"]["gained"], figures["vs_base"]["lost"]) == (4, 0)
    assert (figures["vs_previous"]["gained"], figures["vs_previous"]["lost"]) == (2, 1)
    assert (figures["vs_first"]["gained"], figures["vs_first"]["lost"]) == (3, 1)
    assert figures["vs_first"]["value"] == pytest.approx(0.2)
    assert round_figures(first, base, None)["vs_first"] is None  # round 0 has nothing before it

"""The live change of a digest field between two rounds, with a 95% interval over GRPO groups.

A field the digest pools over trajectories (``truncation_rate`` = truncated / rows, ``hack_rate``
= paid / verified failures, ``reward_mean`` = reward sum / rewarded rows ...) is a ratio of sums
over groups, ``R = sum(num_g) / sum(den_g)``; ``zero_variance_share`` counts each group once.  A
group's trajectories share a prompt and are not independent, so the group is the unit: the
variance of ``R`` is the linearised ratio estimator's over the ``n`` groups,
``n / (n - 1) * sum((num_g - R * den_g)^2) / sum(den_g)^2``, and the change between round n-1
and round n (different groups, independent samples) gets the normal interval
``delta +- z * sqrt(var_before + var_after)``.  One outlier group moves ``R`` and widens the
interval alike, so it cannot make a change look certain.  Held-out accuracy is paired over
the exam's tasks instead (``heldout_stats.paired_difference``, a score interval).

Trusted code: only archive columns written by trusted code are read (the reward as assigned in
training, the verifier's outcome and info, truncation, response tokens).

    change = field_change("truncation_rate", rows_round_0, rows_round_1)
    change.high < 0    # fell beyond chance
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from statistics import NormalDist
from typing import NamedTuple

from meta_agent.digest import HIGH, execution_info, has_no_final_answer, finite_or_none, is_zero_variance
from meta_agent.heldout_stats import CONFIDENCE, outcomes_by_task, paired_difference


class FieldChange(NamedTuple):
    """``after - before`` of one field with its interval; ``n_before``/``n_after`` count groups (tasks for
    the paired exam).  ``low``/``high`` are nan when the interval is undefined (fewer than 2 groups)."""

    before: float
    after: float
    delta: float
    low: float
    high: float
    n_before: int
    n_after: int
    method: str


def _verified(row: dict) -> float | None:
    return finite_or_none(row.get("verified"))


def _paid(row: dict) -> bool:
    reward = finite_or_none(row.get("reward"))
    return reward is not None and reward >= HIGH


def _unpaid(row: dict) -> bool:
    reward = finite_or_none(row.get("reward"))
    return reward is not None and reward < HIGH


def _per_row(value: Callable[[dict], float | bool | None]) -> Callable[[dict], tuple[float, float] | None]:
    """A mean over the rows where ``value`` is known: each such row adds (value, 1)."""
    def contribution(row: dict) -> tuple[float, float] | None:
        v = value(row)
        return None if v is None else (float(v), 1.0)
    return contribution


def _execution_flag(test: Callable[[dict], bool]) -> Callable[[dict], tuple[float, float] | None]:
    def contribution(row: dict) -> tuple[float, float] | None:
        e = execution_info(row)
        return None if e is None else (float(test(e)), 1.0)
    return contribution


# digest field -> one row's (numerator, denominator), or None where the row does not count: the digest's
# own definitions (meta_agent.digest.build_digest and _swe_summary)
ROW_FIELDS: dict[str, Callable[[dict], tuple[float, float] | None]] = {
    "reward_mean": _per_row(lambda r: finite_or_none(r.get("reward"))),
    "verified_mean": _per_row(_verified),
    "truncation_rate": lambda r: (float(bool(r.get("truncated"))), 1.0),
    "mean_response_tokens": _per_row(lambda r: finite_or_none(r.get("response_tokens"))),
    "no_final_answer_rate": _per_row(has_no_final_answer),
    "hack_rate": lambda r: (float(_paid(r)), 1.0) if (v := _verified(r)) is not None and v < HIGH else None,
    "miss_rate": lambda r: (float(_unpaid(r)), 1.0) if (v := _verified(r)) is not None and v >= HIGH else None,
    "format_error_rate": _execution_flag(lambda e: e.get("parse_status") == "malformed" or e.get("status") ==
                                         "malformed" or e.get("exit_status") == "format_error"),
    "patch_failed_rate": _execution_flag(lambda e: e.get("status") == "patch_failed"),
    "test_edit_rate": _execution_flag(lambda e: bool(e.get("touched_tests"))),
    # the trainer's own per-trajectory record (null where a backend does not write it: then unmeasurable)
    "kept_share": lambda r: None if r.get("kept") is None else (float(bool(r["kept"])), 1.0),
}
# digest field -> the column whose values all equal make a group count (share of groups)
GROUP_FIELDS = {"zero_variance_share": "reward", "verified_zero_variance_share": "verified"}
SIGNAL = "signal_share"
"""Share of the groups training kept any trajectory of whose kept rewards differ (by the digest's zero-variance
test, as ``zero_variance_share``) with a verified success among the kept: the gate's signal_share over what the
trainer kept; a group with a trajectory of unknown ``kept`` does not count."""
PER_GROUP = (*ROW_FIELDS, *GROUP_FIELDS, SIGNAL)
"""The fields this module measures over groups; the live check has a documented rule for the others."""


def group_sums(field: str, rows: list[dict]) -> list[tuple[float, float]]:
    """(numerator, denominator) per group of the training ``rows`` that count for ``field``."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    train = [r for r in rows if r.get("split", "train") == "train"]
    if field == SIGNAL:
        members: dict[str, list[dict]] = defaultdict(list)
        for row in train:
            members[str(row.get("group_id"))].append(row)
        out = []
        for group in members.values():
            if any(r.get("kept") is None for r in group):
                continue
            members_kept = [r for r in group if r["kept"] and finite_or_none(r.get("reward")) is not None]
            kept = [float(r["reward"]) for r in members_kept]
            if kept:
                right = any((v := _verified(r)) is not None and v >= HIGH for r in members_kept)
                out.append((float(len(kept) >= 2 and right and not is_zero_variance(kept)), 1.0))
        return out
    if field in GROUP_FIELDS:
        values: dict[str, list[float]] = defaultdict(list)
        for row in train:
            if (v := finite_or_none(row.get(GROUP_FIELDS[field]))) is not None:
                values[str(row.get("group_id"))].append(v)
        return [(float(is_zero_variance(vs)), 1.0) for vs in values.values()]
    for row in train:
        if (c := ROW_FIELDS[field](row)) is not None:
            s = sums[str(row.get("group_id"))]
            s[0] += c[0]
            s[1] += c[1]
    return [(num, den) for num, den in sums.values() if den > 0]


def ratio_and_variance(groups: list[tuple[float, float]]) -> tuple[float, float]:
    """``R = sum(num) / sum(den)`` and its linearised variance over groups (nan below 2 groups)."""
    total = sum(den for _, den in groups)
    if not groups or total <= 0:
        return math.nan, math.nan
    ratio = sum(num for num, _ in groups) / total
    n = len(groups)
    if n < 2:
        return ratio, math.nan
    return ratio, n / (n - 1) * sum((num - ratio * den) ** 2 for num, den in groups) / total ** 2


def field_change(field: str, before_rows: list[dict], after_rows: list[dict],
                 confidence: float = CONFIDENCE) -> FieldChange:
    """The change of ``field`` from ``before_rows`` (round n-1) to ``after_rows`` (round n) with its interval.

    ``heldout_accuracy``: paired over the held-out tasks both rounds answered; a field of ``PER_GROUP``:
    the normal interval over groups described above.  ``ValueError`` for any other field.
    """
    if field == "heldout_accuracy":
        b, a = outcomes_by_task(before_rows), outcomes_by_task(after_rows)
        d = paired_difference(b, a, confidence)
        shared = set(b) & set(a)

        def acc(outcomes: dict[str, float]) -> float:
            return sum(outcomes[t] for t in shared) / len(shared) if shared else math.nan

        return FieldChange(acc(b), acc(a), d.value, d.low, d.high, d.n, d.n, "paired over held-out tasks")
    if field not in PER_GROUP:
        raise ValueError(f"{field!r} is not measured over groups; the fields that are: {', '.join(PER_GROUP)}")
    gb, ga = group_sums(field, before_rows), group_sums(field, after_rows)
    (rb, vb), (ra, va) = ratio_and_variance(gb), ratio_and_variance(ga)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(vb + va)  # nan when either side has fewer than 2 groups
    delta = ra - rb
    return FieldChange(rb, ra, delta, delta - half, delta + half, len(gb), len(ga), "normal over groups")


def controlled_change(field: str, control_rows: list[dict], before_rows: list[dict], after_rows: list[dict],
                      confidence: float = CONFIDENCE) -> FieldChange:
    """The change of ``field`` from round n-1 to round n beyond the change ordinary training made the round
    before (n-2 to n-1): ``(after - before) - (before - control)``, the difference in differences.

    Why: the policy trains every round, so fields like ``no_final_answer_rate`` move whether or not a merge
    did anything; a merge's live benefit must exceed that trend.  Over groups the three rounds are
    independent samples, so the variance is ``var_after + 4 var_before + var_control``; ``heldout_accuracy``
    is paired over the exam tasks all three rounds answered (per task ``a - 2b + c``, normal interval).
    ``before``/``after`` of the result are the two rounds' values, ``delta`` the controlled change.  The
    bounds are nan when a round has fewer than 2 groups (tasks), which confirms nothing.

    The trend's extrapolation, ``2 before - control``, is held to what the field can be (0 to 1): a policy
    whose exam fell to nothing and stayed there did not beat a trend toward below nothing (found live: a
    learning-rate repair merged after a collapse to 0.000 was confirmed at +0.188 by a round still at 0.000).
    So the change is ``after - clip(2 before - control)``, and where the clip holds the extrapolation at a bound
    its interval is the after round's alone (the bound is no estimate).  The clip is of the round's figure, not
    of each task's: per task a binary outcome's trend always leaves [0, 1] and the control would vanish.
    """
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if field == "heldout_accuracy":
        c, b, a = (outcomes_by_task(r) for r in (control_rows, before_rows, after_rows))
        shared = sorted(set(c) & set(b) & set(a))
        trend = (2 * sum(b[t] for t in shared) - sum(c[t] for t in shared)) / len(shared) if shared else math.nan
        bound = _bounded(trend)
        if bound == trend:  # within [0, 1]: the paired difference in differences per task
            diffs = [a[t] - 2 * b[t] + c[t] for t in shared]
        else:  # the trend is held at a bound (nan too): each task against that bound
            diffs = [a[t] - bound for t in shared]
        n = len(diffs)
        mean = sum(diffs) / n if n else math.nan
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1) / n if n > 1 else math.nan
        half = z * math.sqrt(var) if n > 1 else math.nan
        acc_b = sum(b[t] for t in shared) / n if n else math.nan
        acc_a = sum(a[t] for t in shared) / n if n else math.nan
        return FieldChange(acc_b, acc_a, mean, mean - half, mean + half, n, n,
                           "paired over held-out tasks, against the previous round's change")
    if field not in PER_GROUP:
        raise ValueError(f"{field!r} is not measured over groups; the fields that are: {', '.join(PER_GROUP)}")
    (rc, vc), (rb, vb), (ra, va) = (ratio_and_variance(group_sums(field, r))
                                    for r in (control_rows, before_rows, after_rows))
    trend = 2 * rb - rc
    delta = ra - _bounded(trend)
    half = z * math.sqrt(va + (4 * vb + vc if 0.0 <= trend <= 1.0 else 0.0))
    return FieldChange(rb, ra, delta, delta - half, delta + half, len(group_sums(field, before_rows)),
                       len(group_sums(field, after_rows)), "normal over groups, against the previous round's change")


def _bounded(value: float) -> float:
    """A share or an exam outcome extrapolated by a trend, held to [0, 1] (nan stays nan)."""
    return value if math.isnan(value) else min(1.0, max(0.0, value))

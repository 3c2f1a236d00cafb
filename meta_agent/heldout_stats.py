"""Held-out accuracy with exact intervals, and the paired change between two rounds.

Every round answers the same held-out tasks (trusted exam, fixed seed), so two rounds
are compared task by task.  Only the tasks whose 0/1 outcome changed carry evidence:
``gained`` (wrong before, right after) and ``lost`` (right before, wrong after).  Given
``m = gained + lost`` such tasks, ``gained`` is binomial(m, p) under any difference, and
the accuracy difference is ``m / n * (2p - 1)``; the interval here is the exact
(Clopper-Pearson) interval of ``p`` mapped through that line.  It excludes zero exactly
when the two-sided exact McNemar test rejects "no change" at the same level.

    acc = accuracy([1, 0, 1, 1])                     # Accuracy(value=0.75, low=0.194, high=0.994, n=4)
    diff = paired_difference(round0, round3)         # {task_id: 0/1} each; tasks in both only
    diff.excludes_zero                               # True when round 3 is better or worse beyond chance

Pure standard library: the binomial tails are summed exactly and inverted by bisection.
"""

from __future__ import annotations

import math
from typing import NamedTuple

CONFIDENCE = 0.95


class Accuracy(NamedTuple):
    value: float
    low: float
    high: float
    n: int


class PairedDifference(NamedTuple):
    """``after`` minus ``before`` over ``n`` tasks answered in both rounds."""

    value: float
    low: float
    high: float
    n: int
    gained: int
    lost: int

    @property
    def excludes_zero(self) -> bool:
        return self.n > 0 and (self.low > 0 or self.high < 0)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ binomial(n, p)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp
                                 + (n - i) * lq) for i in range(k + 1)))


def _solve(f, target: float) -> float:
    """The p in [0, 1] where the decreasing function ``f`` crosses ``target`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided interval of a binomial proportion with ``k`` successes in ``n`` trials."""
    if not 0 <= k <= n or n <= 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    alpha = (1 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: _binom_cdf(k - 1, n, p), 1 - alpha)
    high = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), alpha)
    return low, high


def accuracy(outcomes: list[float], confidence: float = CONFIDENCE) -> Accuracy:
    """Share of 1s among 0/1 ``outcomes`` with its exact interval; ``ValueError`` for anything but 0/1."""
    k, n = _count_ones(outcomes), len(outcomes)
    if n == 0:
        return Accuracy(math.nan, math.nan, math.nan, 0)
    low, high = clopper_pearson(k, n, confidence)
    return Accuracy(k / n, low, high, n)


def paired_difference(before: dict[str, float], after: dict[str, float],
                      confidence: float = CONFIDENCE) -> PairedDifference:
    """Accuracy of ``after`` minus ``before`` on the task ids both hold (0/1 outcome per task)."""
    common = sorted(set(before) & set(after))
    _count_ones([before[t] for t in common] + [after[t] for t in common])
    n = len(common)
    gained = sum(1 for t in common if after[t] == 1 and before[t] == 0)
    lost = sum(1 for t in common if after[t] == 0 and before[t] == 1)
    if n == 0:
        return PairedDifference(math.nan, math.nan, math.nan, 0, 0, 0)
    m = gained + lost
    if m == 0:  # no task changed: no evidence of a change either way
        return PairedDifference(0.0, 0.0, 0.0, n, 0, 0)
    low, high = clopper_pearson(gained, m, confidence)
    return PairedDifference((gained - lost) / n, m / n * (2 * low - 1), m / n * (2 * high - 1), n, gained, lost)


def outcomes_by_task(rows: list[dict]) -> dict[str, float]:
    """``{task_id: verified}`` of a round's held-out rows (the exam answers each task once)."""
    return {r["task_id"]: float(r["verified"]) for r in rows if r.get("split") == "heldout"
            and r.get("verified") is not None}


def _count_ones(outcomes: list[float]) -> int:
    bad = [o for o in outcomes if o not in (0, 1)]
    if bad:
        raise ValueError(f"held-out outcomes must be 0 or 1 (the verifier's verdicts), got {bad[:3]}")
    return int(sum(outcomes))


def format_interval(value: float, low: float, high: float, signed: bool = False) -> str:
    """``0.125 [0.071, 0.197]`` (``+0.047 [+0.004, +0.094]`` when ``signed``); ``-`` for no data."""
    if math.isnan(value):
        return "-"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


def round_figures(outcomes: dict[str, float], base: dict[str, float] | None,
                  previous: dict[str, float] | None) -> dict:
    """A round's exam for its digest: accuracy with interval, and the paired change from the untrained
    base policy and from the previous round (each ``None`` when that exam is unknown)."""

    def paired(before: dict[str, float] | None) -> dict | None:
        if not before:
            return None
        d = paired_difference(before, outcomes)
        return d._asdict() | {"excludes_zero": d.excludes_zero}

    return {"accuracy": accuracy(list(outcomes.values()))._asdict(),
            "base": accuracy(list(base.values()))._asdict() if base else None,
            "vs_base": paired(base), "vs_previous": paired(previous)}

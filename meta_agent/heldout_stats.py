"""Held-out accuracy with exact intervals, and the paired change between two rounds.

Every round answers the same held-out tasks (trusted exam, fixed seed), so two rounds
are compared task by task: ``gained`` tasks went wrong -> right, ``lost`` right -> wrong.
The interval of the difference is Tango's score interval for paired proportions (Tango 1998,
Statistics in Medicine 17:891): every difference ``delta`` whose score test against the observed
``gained`` and ``lost`` is not rejected, the share of changed tasks estimated under ``delta``.
It is a recommended interval for paired binary data (Fagerland, Lydersen and Laake 2013); unlike
an interval conditional on the changed tasks, it is not pinned to the estimate when no task was
lost, and it has width when none changed (``±z²/(n+z²)``).  An accuracy's own interval is exact
(Clopper-Pearson).

    acc = accuracy([1, 0, 1, 1])                     # Accuracy(value=0.75, low=0.194, high=0.994, n=4)
    diff = paired_difference(round0, round3)         # {task_id: 0/1} each; tasks in both only
    diff.excludes_zero                               # True when round 3 is better or worse beyond chance

Pure standard library: the binomial tails are summed exactly and inverted by bisection.
"""

from __future__ import annotations

import math
from statistics import NormalDist
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
    low, high = tango_interval(gained, lost, n, confidence)
    return PairedDifference((gained - lost) / n, low, high, n, gained, lost)


def tango_interval(gained: int, lost: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Tango's score interval of ``(gained - lost) / n``: the ``delta`` in [-1, 1] where ``|score(delta)| <= z``."""
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)

    def score(delta: float) -> float:  # decreasing in delta
        a, b, c = 2 * n, -gained - lost + (2 * n - gained + lost) * delta, -lost * delta * (1 - delta)
        lost_share = (-b + math.sqrt(max(0.0, b * b - 4 * a * c))) / (2 * a)  # its MLE given delta
        spread = n * (2 * lost_share + delta * (1 - delta))
        if spread <= 0:  # delta = +-1 with every task changed that way: no evidence against it
            return 0.0 if gained - lost == n * delta else math.copysign(math.inf, gained - lost - n * delta)
        return (gained - lost - n * delta) / math.sqrt(spread)

    def crossing(target: float, lo: float, hi: float) -> float:
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if score(mid) > target else (lo, mid)
        return (lo + hi) / 2

    estimate = (gained - lost) / n
    low = -1.0 if score(-1.0) <= z else crossing(z, -1.0, estimate)
    high = 1.0 if score(1.0) >= -z else crossing(-z, estimate, 1.0)
    return low, high


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


def format_change(value: float, low: float, high: float, excludes_zero: bool) -> str:
    """A paired change as ``+0.070 [+0.000, +0.146]``, starred when its interval excludes zero."""
    return format_interval(value, low, high, signed=True) + (" *" if excludes_zero else "")


def round_figures(outcomes: dict[str, float], base: dict[str, float] | None,
                  previous: dict[str, float] | None, first: dict[str, float] | None = None) -> dict:
    """A round's exam for its digest: accuracy with interval, and the paired change from the untrained
    base policy, from the previous round and from round 0 (each ``None`` when that exam is unknown).
    The change from round 0 is what training after the first round added: the run's learning beyond
    what one round (mostly the answer format) gives."""

    def paired(before: dict[str, float] | None) -> dict | None:
        if not before:
            return None
        d = paired_difference(before, outcomes)
        return d._asdict() | {"excludes_zero": d.excludes_zero}

    return {"accuracy": accuracy(list(outcomes.values()))._asdict(),
            "base": accuracy(list(base.values()))._asdict() if base else None,
            "vs_base": paired(base), "vs_previous": paired(previous), "vs_first": paired(first)}


HELDOUT_REGRESSION = "heldout_regression"


def add_heldout_regression(digest: dict) -> None:
    """Name the trusted failure mode ``heldout_regression`` in ``digest`` (once its ``heldout`` figures are in)
    when this round's exam fell from the exam of the policy it trained from (``vs_previous``: the previous
    round's, or the round a rollback restarted it from, ``trained_from``) with a paired 95% interval wholly below
    zero.  A round that trained from the untrained base policy (round 0) is paired with the base policy's exam.

    The policy lost what it knew: the learning rate, or an update too large for it, is the usual cause (the
    round's own reward may still rise).  An error, since the held-out exam is the run's measure of progress.
    """
    heldout = digest.get("heldout") or {}
    n = digest.get("round", 0)
    start = heldout.get("trained_from", n - 1 if n else None)  # digests before the lineage: round n-1
    if start is None:
        paired, since = heldout.get("vs_base"), "the untrained base policy"
    else:
        paired = heldout.get("vs_previous")
        since = "the previous round" if start == n - 1 else f"round {start}'s policy, which it trained from"
    if not paired or not paired.get("n") or not paired["high"] < 0:
        return
    drop = -paired["value"]
    message = (f"heldout_accuracy fell {drop:.3f} from {since} (paired 95% interval "
               f"[{paired['low']:+.3f}, {paired['high']:+.3f}] over {paired['n']} tasks: {paired['lost']} lost, "
               f"{paired['gained']} gained)")
    modes = [m for m in digest.get("failure_modes") or [] if m.get("name") != HELDOUT_REGRESSION]
    digest["failure_modes"] = [{"name": HELDOUT_REGRESSION, "source": "trusted", "severity": "error", "rate": drop,
                                "message": message, "examples": []}, *modes]

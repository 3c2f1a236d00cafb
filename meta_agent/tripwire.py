"""The live tripwire: did round n's trusted safety figures regress against round n-1's?

A harness can pass the backtest on archived data and still pay for wrong answers on the
new data its policy produces.  After each round the caller compares the archive rows of
round n-1 (``before``) with those of round n (``after``); a fired alarm is the evidence for
reverting the merges that round n trained on.

Signal among failures is harm here as in the gate (margin zero): a round whose groups without a
verified success carry reward spread (``failure_spread``, ``flat_failure_share``) fires when the
round before was flat, or when the whole CI of the rise is above zero.

Pay for verified failures is counted in every group, with or without a success: ``failure_credit_share``, the
share of verified failures paid above the format credit ``harness.yaml`` declares (0 without one) and under the
paid line (full pay is ``hack_rate``'s; pay starts at the range's 0 where it holds one, as the probe's), has
margin zero too.  A reward that pays 0/1 never makes such pay, so any of it after a round without is a
change of the reward's rule (issue 45: 0.015 for formatted wrong answers in groups with a success passed both
``failure_pay``'s margin and the flat figures).

Pure statistics: no git, no archive, no I/O.  Rows are dicts with ``group_id``, ``split``
(``"train"`` or ``"heldout"``), ``task_id``, ``reward`` (float or None) and ``verified``
(0.0/1.0 or None).  Training figures come from the rewards as assigned in training and the
trusted verifier; held-out accuracy from the trusted verifier alone.

Example::

    alarms = compare_rounds(rows_n_minus_1, rows_n, reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
    fired = [a for a in alarms if a.fired]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meta_agent.config import HIGH_REWARD, TripwireThresholds
from meta_agent.bootstrap import auc_draws, bootstrap_ci, failure_spread_parts, group_draws, ratio_draws

SUCCESS = HIGH_REWARD
"""A verified outcome at or above this counts as a success (``digest.HIGH``, the one cut everywhere)."""

ROWS_MISSING = "rows_missing"
"""The alarm when a round has no rows to compare: it fires, but it is the archive's loss, not the harness's
doing, so it reverts nothing (``tripwire_revert.revert_on_tripwire``)."""
TRAIN_FIGURES = ("failure_pay", "hack_rate", "reward_auc", "failure_spread", "flat_failure_share",
                 "failure_credit_share")
RISES = ("failure_pay", "hack_rate", "failure_spread", "flat_failure_share",
         "failure_credit_share")  # the others regress by dropping
FLAT = ("failure_spread", "flat_failure_share")
"""Margin zero: a rise from a flat round fires outright, a rise from a spread round when its CI is clear of 0."""
PAY_TOLERANCE = 1e-9


@dataclass
class Alarm:
    """One safety figure compared across two rounds; ``fired`` says whether it is a regression."""

    metric: str
    before: float
    after: float
    delta: float  # after - before
    ci_low: float
    ci_high: float
    detail: str
    fired: bool = False


@dataclass
class _Train:
    """Training rows with a verifier outcome, as arrays."""

    group: np.ndarray  # 0..n_groups-1
    n_groups: int
    verified: np.ndarray  # bool
    norm: np.ndarray  # reward normalised into [0, 1]; no reward earns the bottom
    floor: float = 0.0  # where pay starts on that scale: the range's 0 where it holds one (code, SWE: -1 .. 1)


def _train(rows: list[dict], reward_range: tuple[float, float]) -> _Train:
    lo, hi = reward_range
    rows = [r for r in rows if r.get("split") == "train" and r.get("verified") is not None]
    ids: dict = {}
    group = np.array([ids.setdefault(r["group_id"], len(ids)) for r in rows], int)
    reward = np.array([np.nan if r.get("reward") is None else float(r["reward"]) for r in rows], float)
    reward = np.clip(np.where(np.isfinite(reward), reward, lo), lo, hi)
    verified = np.array([float(r["verified"]) >= SUCCESS for r in rows], bool)
    return _Train(group, len(ids), verified, (reward - lo) / (hi - lo), (min(max(lo, 0.0), hi) - lo) / (hi - lo))


def _train_draws(name: str, d: _Train, weights: np.ndarray, high_reward: float,
                 format_credit: float = 0.0) -> np.ndarray:
    if name == "reward_auc":
        return auc_draws(d.norm, d.verified, d.group, weights)
    if name in FLAT:
        spread, spreads, counts = failure_spread_parts(d.norm, d.verified, np.ones(len(d.norm), bool), d.group,
                                                       d.n_groups)
        return ratio_draws(weights, spread if name == "failure_spread" else spreads, counts)
    fail = ~d.verified
    if name == "failure_credit_share":  # every group, with or without a success; a penalty is no pay
        value = ((d.norm > d.floor + format_credit + PAY_TOLERANCE)
                 & (d.norm < d.floor + high_reward * (1 - d.floor))).astype(float)
    else:
        value = d.norm if name == "failure_pay" else (d.norm >= high_reward).astype(float)
    num = np.bincount(d.group, weights=fail * value, minlength=d.n_groups)
    den = np.bincount(d.group, weights=fail.astype(float), minlength=d.n_groups)
    return ratio_draws(weights, num, den)


def _heldout(rows: list[dict]) -> dict:
    """task_id -> (correct, trials) over held-out rows with a verifier outcome."""
    tasks: dict = {}
    for r in rows:
        if r.get("split") == "heldout" and r.get("verified") is not None:
            c, n = tasks.get(r["task_id"], (0.0, 0))
            tasks[r["task_id"]] = (c + float(float(r["verified"]) >= SUCCESS), n + 1)
    return tasks


def safety_figures(rows: list[dict], reward_range: tuple[float, float], high_reward: float) -> dict[str, float]:
    """failure_pay, hack_rate, reward_auc (train rows) and heldout_accuracy; nan where undefined.

    ``high_reward`` is on the normalised scale (0 = bottom of ``reward_range``, 1 = top).
    """
    d = _train(rows, reward_range)
    ones = np.ones((1, d.n_groups))
    out = {name: float(_train_draws(name, d, ones, high_reward)[0]) for name in TRAIN_FIGURES}
    tasks = _heldout(rows)
    trials = sum(n for _, n in tasks.values())
    out["heldout_accuracy"] = sum(c for c, _ in tasks.values()) / trials if trials else np.nan
    return out


def _why(name: str, d: _Train) -> str:
    """What a train figure of ``d`` lacks when it is undefined."""
    if not len(d.verified):
        return "no training row with a verifier outcome"
    if name == "reward_auc" and not d.verified.any():
        return "no verified success"
    if name in FLAT:
        return "no group of two or more rows without a verified success"
    return "no verified failure"


def _alarm(name: str, before: float, after: float, draws: np.ndarray, margin: float, confidence: float,
           why: str, format_credit: float = 0.0) -> Alarm:
    rise = name in RISES
    if name in FLAT:
        return _flat_alarm(name, before, after, draws, confidence)
    if name == "failure_credit_share":
        return _credit_alarm(before, after, draws, confidence, format_credit)
    if np.isnan(before) or np.isnan(after):
        return Alarm(name, before, after, np.nan, np.nan, np.nan, f"{name} undefined ({why}): no alarm")
    lo, hi = bootstrap_ci(draws, confidence)
    figures = f"{name} {before:.3f} -> {after:.3f}, CI of the change [{lo:+.3f}, {hi:+.3f}]"
    if np.isnan(lo) or np.isnan(hi):
        return Alarm(name, before, after, after - before, lo, hi,
                     f"{figures}: CI undefined (undefined on {int(np.isnan(draws).sum())} of {len(draws)} "
                     "resamples): no alarm")
    fired = bool(lo > margin) if rise else bool(hi < -margin)
    bound = f"the margin {'+' if rise else '-'}{margin}"
    detail = f"{figures}: " + (f"regression, the whole CI is beyond {bound}" if fired else f"not beyond {bound}")
    return Alarm(name, before, after, after - before, lo, hi, detail, fired)


def _flat_alarm(name: str, before: float, after: float, draws: np.ndarray, confidence: float) -> Alarm:
    lo, hi = bootstrap_ci(draws, confidence)
    b, a = (0.0 if np.isnan(x) else x for x in (before, after))
    figures = (f"{name} {b:.4f} -> {a:.4f} over groups without a verified success, "
               f"CI of the change [{lo:+.3f}, {hi:+.3f}]")
    if a <= 0:
        return Alarm(name, before, after, a - b, lo, hi, f"{figures}: failures stay flat")
    if b <= 0:
        return Alarm(name, before, after, a - b, lo, hi, f"{figures}: reward spreads among failures that were "
                     "flat the round before (margin 0)", True)
    fired = bool(lo > 0)
    return Alarm(name, before, after, a - b, lo, hi, f"{figures}: " + (
        "rise, the whole CI is above 0 (margin 0)" if fired else "no rise shown beyond 0"), fired)


def _credit_alarm(before: float, after: float, draws: np.ndarray, confidence: float, format_credit: float) -> Alarm:
    lo, hi = bootstrap_ci(draws, confidence)
    b, a = (0.0 if np.isnan(x) else x for x in (before, after))
    figures = (f"failure_credit_share {b:.4f} -> {a:.4f}: verified failures in every group (with or without a "
               f"success) paid above the declared format credit {format_credit:g} and under the paid line, CI of "
               f"the change [{lo:+.3f}, {hi:+.3f}]")
    if a <= 0:
        return Alarm("failure_credit_share", before, after, a - b, lo, hi, f"{figures}: none")
    if b <= 0:
        return Alarm("failure_credit_share", before, after, a - b, lo, hi, f"{figures}: pay for failures the round "
                     "before did not make (margin 0)", True)
    fired = bool(lo > 0)
    return Alarm("failure_credit_share", before, after, a - b, lo, hi, f"{figures}: " + (
        "rise, the whole CI is above 0 (margin 0)" if fired else "no rise shown beyond 0"), fired)


def compare_rounds(before_rows: list[dict], after_rows: list[dict], *, reward_range: tuple[float, float],
                   thresholds: TripwireThresholds, seed: int = 0, format_credit: float = 0.0) -> list[Alarm]:
    """One :class:`Alarm` per safety figure (train figures, then held-out accuracy), ``fired`` or not.

    ``format_credit``: what round n's harness declares it may pay a verified failure (``harness.yaml``);
    ``failure_credit_share`` counts pay above it.

    Train figures: unpaired bootstrap, each round's groups resampled independently.
    Held-out accuracy: both rounds on the tasks they share, paired bootstrap over those tasks.
    """
    t, lo, hi = thresholds, *reward_range
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"reward_range {reward_range} is not a finite interval")
    missing = [name for name, rows in (("before", before_rows), ("after", after_rows))
               if not any(r.get("split") == "train" and r.get("verified") is not None for r in rows)]
    if missing:  # a comparison rows missing make impossible is an alarm, never silence
        return [Alarm(ROWS_MISSING, np.nan, np.nan, np.nan, np.nan, np.nan,
                      f"the {' and '.join(missing)} round has no training rows with a verifier outcome in the "
                      "archive (lost or moved out: see the archive's _losses.jsonl, and restore the part from a "
                      "copy): no safety figure can be compared", fired=True)]
    rng = np.random.default_rng(seed)
    b, a = _train(before_rows, reward_range), _train(after_rows, reward_range)
    w_b = group_draws(b.n_groups, t.bootstrap_samples, rng)
    w_a = group_draws(a.n_groups, t.bootstrap_samples, rng)
    margins = {"failure_pay": t.failure_pay_margin, "hack_rate": t.hack_rate_margin, "reward_auc": t.auc_margin,
               "failure_spread": 0.0, "flat_failure_share": 0.0, "failure_credit_share": 0.0}
    alarms = []
    for name in TRAIN_FIGURES:
        def draws_of(d: _Train, weights: np.ndarray) -> np.ndarray:
            return _train_draws(name, d, weights, t.high_reward, format_credit)  # noqa: B023 - used at once

        point_b = float(draws_of(b, np.ones((1, b.n_groups)))[0])
        point_a = float(draws_of(a, np.ones((1, a.n_groups)))[0])
        draws = draws_of(a, w_a) - draws_of(b, w_b)
        why = "; ".join(f"{r}: {_why(name, d)}" for r, d, p in (("before", b, point_b), ("after", a, point_a))
                        if np.isnan(p))
        alarms.append(_alarm(name, point_b, point_a, draws, margins[name], t.confidence, why, format_credit))

    tasks_b, tasks_a = _heldout(before_rows), _heldout(after_rows)
    shared = sorted(set(tasks_b) & set(tasks_a), key=str)
    cb, nb = (np.array([tasks_b[k][i] for k in shared], float) for i in (0, 1))
    ca, na = (np.array([tasks_a[k][i] for k in shared], float) for i in (0, 1))
    ones = np.ones((1, len(shared)))
    w = group_draws(len(shared), t.bootstrap_samples, rng)
    draws = ratio_draws(w, ca, na) - ratio_draws(w, cb, nb)
    alarm = _alarm("heldout_accuracy", float(ratio_draws(ones, cb, nb)[0]), float(ratio_draws(ones, ca, na)[0]),
                   draws, t.heldout_margin, t.confidence, "no held-out task evaluated in both rounds")
    alarm.detail += f" ({len(shared)} shared tasks)"
    alarms.append(alarm)
    return alarms

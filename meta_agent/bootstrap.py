"""Bootstrap statistics over whole GRPO groups, shared by the gate and the live tripwire.

Every function takes a matrix of group *weights*: one row per bootstrap resample, one column per
group, each entry how often that group was drawn (``group_draws``).  A metric computed from
per-group sums then becomes one matrix product per resample instead of a Python loop.

    w = group_draws(n_groups=64, samples=1000, rng=np.random.default_rng(0))
    lo, hi = bootstrap_ci(ratio_draws(w, hits_per_group, trials_per_group), confidence=0.95)
"""

from __future__ import annotations

import numpy as np


def group_draws(n_groups: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` x ``n_groups`` multiplicities of a bootstrap over whole groups."""
    idx = rng.integers(0, n_groups, (samples, n_groups)) + (np.arange(samples) * n_groups)[:, None]
    return np.bincount(idx.ravel(), minlength=samples * n_groups).reshape(samples, n_groups).astype(float)


def ratio_draws(weights: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """sum(w * num) / sum(w * den) per row of ``weights`` (per-group sums); nan where nothing counts."""
    n, d = weights @ num, weights @ den
    return np.divide(n, d, out=np.full(len(d), np.nan), where=d > 0)


def auc_draws(score: np.ndarray, positive: np.ndarray, group: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of group ``weights``: probability that a positive outranks a negative (ties count half)."""
    levels, inverse = np.unique(score, return_inverse=True)
    pos, neg = np.zeros((weights.shape[1], len(levels))), np.zeros((weights.shape[1], len(levels)))
    np.add.at(pos, (group, inverse), positive.astype(float))
    np.add.at(neg, (group, inverse), (~positive).astype(float))
    w_pos, w_neg = weights @ pos, weights @ neg
    total = w_pos.sum(1) * w_neg.sum(1)
    below = np.cumsum(w_neg, 1) - w_neg
    num = (w_pos * (below + 0.5 * w_neg)).sum(1)
    return np.divide(num, total, out=np.full(len(total), np.nan), where=total > 0)


def bootstrap_ci(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile CI; an undefined draw counts against both bounds (low as -inf, high as +inf)."""
    alpha = (1 - confidence) / 2
    lo = np.quantile(np.where(np.isnan(draws), -np.inf, draws), alpha, method="lower")
    hi = np.quantile(np.where(np.isnan(draws), np.inf, draws), 1 - alpha, method="higher")
    return (float(lo) if np.isfinite(lo) else np.nan), (float(hi) if np.isfinite(hi) else np.nan)


FLAT_TOLERANCE = 1e-9
"""Reward differences below this (float noise) do not count as spread among failures."""


def failure_spread_parts(norm: np.ndarray, success: np.ndarray, kept: np.ndarray, group: np.ndarray,
                         n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: the reward spread of a group with no kept verified success, whether it spreads, and whether it counts.

    A group counts when it keeps at least two trajectories and none of them is a verified success.  Among
    such failures any spread of reward is a learning signal toward something that is not the task (GRPO
    normalises each group, so 0.015 against 0 is a full-size push): its ``spread`` (normalised
    max - min) gives the mass, ``spreads`` (0/1) the share of such groups.
    """
    count = np.bincount(group[kept], minlength=n_groups)
    wins = np.bincount(group[kept & success], minlength=n_groups)
    top, bottom = np.full(n_groups, -np.inf), np.full(n_groups, np.inf)
    np.maximum.at(top, group[kept], norm[kept])
    np.minimum.at(bottom, group[kept], norm[kept])
    counts = (count >= 2) & (wins == 0)
    spread = np.where(counts, top - bottom, 0.0)
    spread = np.where(spread > FLAT_TOLERANCE, spread, 0.0)
    return spread, (spread > 0).astype(float), counts.astype(float)

"""Gate metrics: what the gate measures of each arm on the sample, with paired bootstrap CIs.

Rewards are validated here: non-finite, outside the domain's ``reward_range`` or beyond
float32 counts as an error of that trajectory, which then earns the bottom of the range in
every metric.  CIs are paired percentile bootstraps over GRPO groups (a resample draws whole
groups; both arms are measured on the same draw), widened outward when a resample leaves a
metric undefined.

    metrics = paired_metrics(score(main, reward_range), score(cand, reward_range), sample, thresholds)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meta_agent.bootstrap import auc_draws, bootstrap_ci, failure_spread_parts, group_draws, ratio_draws
from meta_agent.config import GateThresholds

GATE_METRICS = ("error_rate", "reward_auc", "hack_rate", "failure_pay", "miss_rate", "signal_share",
                "kept_share", "mean_reward", "failure_spread", "flat_failure_share")
FLOAT32_MAX = float(np.finfo(np.float32).max)
_WHY = {"error_rate": "no trajectory", "kept_share": "no trajectory", "mean_reward": "nothing kept",
        "hack_rate": "no verified failure", "failure_pay": "no verified failure",
        "miss_rate": "no kept verified success",
        "failure_spread": "no group keeps two trajectories without a verified success",
        "flat_failure_share": "no group keeps two trajectories without a verified success"}


@dataclass
class Arm:
    """One harness's outputs aligned to the sample's trajectory order."""

    reward: np.ndarray  # float, nan where the harness erred
    keep: np.ndarray  # bool
    error: np.ndarray  # bool
    failed: str | None = None  # the whole run failed (import error, timeout, OOM...)


@dataclass
class Sample:
    """The trusted side of the sample: groups and verifier outcomes."""

    group: np.ndarray  # int group index per trajectory, 0..n_groups-1
    verified: np.ndarray  # bool, verifier outcome >= 0.5

    @property
    def n_groups(self) -> int:
        return int(self.group.max()) + 1 if len(self.group) else 0


@dataclass
class MetricResult:
    name: str
    main: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float
    undefined_draws: int = 0  # resamples on which the delta was undefined


@dataclass
class Scored:
    """An arm as the gate measures it: valid rewards, errors at the bottom of the range."""

    reward: np.ndarray
    norm: np.ndarray  # reward mapped into [0, 1]
    keep: np.ndarray
    error: np.ndarray  # harness errors and invalid rewards
    invalid: dict[str, int]  # invalid rewards on trajectories the harness did not mark as errors


def score(arm: Arm, reward_range: tuple[float, float]) -> Scored:
    lo, hi = reward_range
    r = np.asarray(arm.reward, float)
    finite = np.isfinite(r)
    beyond32 = finite & (np.abs(np.where(finite, r, 0.0)) > FLOAT32_MAX)
    outside = finite & ~beyond32 & ((r < lo) | (r > hi))
    harness_error = np.asarray(arm.error, bool)
    error = harness_error | ~finite | beyond32 | outside
    fresh = ~harness_error
    invalid = {"non_finite": int((fresh & ~finite).sum()), "outside_range": int((fresh & outside).sum()),
               "beyond_float32": int((fresh & beyond32).sum())}
    reward = np.where(error, lo, r)
    return Scored(reward, (reward - lo) / (hi - lo), np.asarray(arm.keep, bool), error, invalid)


def ratio_parts(s: Scored, sample: Sample, t: GateThresholds) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per group numerator and denominator of every ratio metric."""
    g, n_groups = sample.group, sample.n_groups

    def per_group(x: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=x.astype(float), minlength=n_groups)

    kept, v = s.keep, sample.verified
    fail, succ, paid = kept & ~v, kept & v, s.norm >= t.high_reward
    count = per_group(kept)
    top, bottom = np.full(n_groups, -np.inf), np.full(n_groups, np.inf)
    np.maximum.at(top, g[kept], s.norm[kept])
    np.minimum.at(bottom, g[kept], s.norm[kept])
    # GRPO's signal is a group's contrast with a right answer in it: spread among wrong answers alone teaches
    # the policy something that is not the task (``failure_spread``, a harm), so a candidate that stops paying
    # a wrong answer and flattens such a group loses no signal
    signal = (count >= 2) & (top - bottom > t.signal_min_spread) & (per_group(succ) >= 1)
    everyone = per_group(np.ones(len(g), bool))
    spread, spreads, flat_groups = failure_spread_parts(s.norm, v, kept, g, n_groups)
    # Pay of wrong answers that reaches training, per verified failure of the sample (kept or not): the same
    # population in both arms.  Per *kept* failure, a main whose filter drops every failure had no value, and a
    # candidate that merely stopped dropping them could not be judged; here dropping a failure counts as
    # paying it nothing (it does not train), and a filter that kept paid failures out still protects main.
    failures = per_group(~v)
    return {
        "error_rate": (per_group(s.error), everyone),
        "hack_rate": (per_group(fail & paid), failures),
        "failure_pay": (per_group(fail * s.norm), failures),
        "miss_rate": (per_group(succ & ~paid), per_group(succ)),
        "signal_share": (signal.astype(float), (count >= 1).astype(float)),
        "kept_share": (count, everyone),
        "mean_reward": (per_group(kept * s.reward), count),
        "failure_spread": (spread, flat_groups),
        "flat_failure_share": (spreads, flat_groups),
    }


def metric_draws(name: str, s: Scored, parts: dict, sample: Sample, weights: np.ndarray) -> np.ndarray:
    if name == "reward_auc":  # over all trajectories: a filter cannot hide a mis-ranked reward
        return auc_draws(s.reward, sample.verified, sample.group, weights)
    if name == "signal_share":  # an arm that keeps no trajectory (in a resample too) trains on no contrast: 0
        return np.nan_to_num(ratio_draws(weights, *parts[name]), nan=0.0)
    return ratio_draws(weights, *parts[name])


def paired_metrics(main: Scored, cand: Scored, sample: Sample, t: GateThresholds,
                    seed: int = 0) -> dict[str, MetricResult]:
    """Point estimates and paired bootstrap CIs of the delta for every gate metric."""
    n_groups = sample.n_groups
    draws = group_draws(n_groups, t.bootstrap_samples, np.random.default_rng(seed))
    ones = np.ones((1, n_groups))
    parts_m, parts_c = ratio_parts(main, sample, t), ratio_parts(cand, sample, t)
    out: dict[str, MetricResult] = {}
    for name in GATE_METRICS:
        m = float(metric_draws(name, main, parts_m, sample, ones)[0])
        c = float(metric_draws(name, cand, parts_c, sample, ones)[0])
        deltas = metric_draws(name, cand, parts_c, sample, draws) - metric_draws(name, main, parts_m, sample, draws)
        lo, hi = bootstrap_ci(deltas, t.confidence)
        out[name] = MetricResult(name, m, c, c - m, lo, hi, int(np.isnan(deltas).sum()))
    return out


def why_undefined(name: str, r: MetricResult, sample: Sample) -> str:
    if name == "reward_auc":
        return "no verified success" if not sample.verified.any() else "no verified failure"
    arms = [f"{arm}: {_WHY[name]}" for arm, x in (("main", r.main), ("candidate", r.candidate)) if np.isnan(x)]
    return "; ".join(arms)

"""The trusted gate: compare a candidate harness with ``main`` on the same archived sample.

Inputs are what harness code produced in the sandbox (rewards, keep-masks, errors)
and what the trusted verifier stored in the archive (``verified``).  Every metric,
confidence interval and the decision is computed here, on the host.

Confidence intervals are paired percentile bootstraps over GRPO groups: a resample
draws whole groups, and both arms are measured on the same draw.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from meta_agent.config import GateThresholds

GATE_METRICS = ("error_rate", "reward_auc", "hack_rate", "miss_rate", "signal_share", "kept_share", "mean_reward")
_EFFECT = re.compile(r"^\s*([a-z_]+)\s+(increase|decrease|unchanged)\b", re.IGNORECASE)


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

    group: np.ndarray  # int group index per trajectory
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


@dataclass
class EffectCheck:
    text: str
    metric: str | None
    direction: str | None
    status: str  # held | contradicted | inconclusive | live | unparsed


@dataclass
class GateResult:
    decision: str  # merge | reject
    reasons: list[str]
    checks: list[dict]
    metrics: dict[str, MetricResult]
    effects: list[EffectCheck] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "decision": self.decision,
            "reasons": self.reasons,
            "checks": self.checks,
            "metrics": {k: asdict(v) for k, v in self.metrics.items()},
            "effects": [asdict(e) for e in self.effects],
        }


def _auc(score: np.ndarray, positive: np.ndarray, weight: np.ndarray) -> float:
    """Weighted probability that a verified success outranks a verified failure (ties count half)."""
    levels, inverse = np.unique(score, return_inverse=True)
    w_pos = np.bincount(inverse, weights=weight * positive, minlength=len(levels))
    w_neg = np.bincount(inverse, weights=weight * ~positive, minlength=len(levels))
    total = w_pos.sum() * w_neg.sum()
    if total == 0:
        return float("nan")
    below = np.cumsum(w_neg) - w_neg
    return float((w_pos * (below + 0.5 * w_neg)).sum() / total)


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    d = float(den.sum())
    return float(num.sum()) / d if d > 0 else float("nan")


def _group_signal(arm: Arm, sample: Sample) -> np.ndarray:
    """Per group: does it still give GRPO a gradient (>= 2 kept members with unequal rewards)?"""
    reward = np.nan_to_num(arm.reward, nan=0.0)
    n = sample.n_groups
    kept = arm.keep.astype(bool)
    count = np.bincount(sample.group[kept], minlength=n)
    hi = np.full(n, -np.inf)
    lo = np.full(n, np.inf)
    np.maximum.at(hi, sample.group[kept], reward[kept])
    np.minimum.at(lo, sample.group[kept], reward[kept])
    return (count >= 2) & (hi > lo)


MetricFn = Callable[[Arm, Sample, np.ndarray, np.ndarray], float]


def _metric_fns(t: GateThresholds) -> dict[str, MetricFn]:
    """Each metric takes group weights ``wg`` (bootstrap multiplicities) and the arm's group signal."""

    def paid(arm: Arm) -> np.ndarray:
        # an erroring trajectory earns nothing: a crash must never look like payment
        return np.nan_to_num(arm.reward, nan=0.0) >= t.high_reward

    def error_rate(arm, s, wg, sig):
        w = wg[s.group]
        return _ratio(w * arm.error, w)

    def reward_auc(arm, s, wg, sig):
        return _auc(np.nan_to_num(arm.reward, nan=0.0), s.verified, wg[s.group])

    def hack_rate(arm, s, wg, sig):
        w = wg[s.group] * ~s.verified
        return _ratio(w * paid(arm), w)

    def miss_rate(arm, s, wg, sig):
        w = wg[s.group] * s.verified
        return _ratio(w * ~paid(arm), w)

    def kept_share(arm, s, wg, sig):
        w = wg[s.group]
        return _ratio(w * arm.keep, w)

    def signal_share(arm, s, wg, sig):
        return _ratio(wg * sig, wg)

    def mean_reward(arm, s, wg, sig):
        w = wg[s.group]
        return _ratio(w * np.nan_to_num(arm.reward, nan=0.0), w)

    return {
        "error_rate": error_rate, "reward_auc": reward_auc, "hack_rate": hack_rate, "miss_rate": miss_rate,
        "signal_share": signal_share, "kept_share": kept_share, "mean_reward": mean_reward,
    }


def paired_metrics(main: Arm, cand: Arm, sample: Sample, t: GateThresholds, seed: int = 0) -> dict[str, MetricResult]:
    """Point estimates and paired bootstrap CIs (resampling whole groups) for every gate metric."""
    fns = _metric_fns(t)
    n = sample.n_groups
    rng = np.random.default_rng(seed)
    draws = [np.bincount(rng.integers(0, n, n), minlength=n).astype(float) for _ in range(t.bootstrap_samples)]
    ones = np.ones(n)
    sig_main, sig_cand = _group_signal(main, sample), _group_signal(cand, sample)
    alpha = (1 - t.confidence) / 2
    out: dict[str, MetricResult] = {}
    for name, fn in fns.items():
        m, c = fn(main, sample, ones, sig_main), fn(cand, sample, ones, sig_cand)
        deltas = np.array([fn(cand, sample, w, sig_cand) - fn(main, sample, w, sig_main) for w in draws])
        deltas = deltas[np.isfinite(deltas)]
        lo, hi = np.quantile(deltas, [alpha, 1 - alpha]) if len(deltas) else (np.nan, np.nan)
        out[name] = MetricResult(name, m, c, c - m, float(lo), float(hi))
    return out


def parse_effect(text: str) -> tuple[str, str] | None:
    """``"reward_auc increase: because ..."`` -> ("reward_auc", "increase")."""
    match = _EFFECT.match(text)
    return (match.group(1).lower(), match.group(2).lower()) if match else None


def check_effects(predicted: list[str], metrics: dict[str, MetricResult], t: GateThresholds) -> list[EffectCheck]:
    checks = []
    for text in predicted:
        parsed = parse_effect(text)
        if parsed is None:
            checks.append(EffectCheck(text, None, None, "unparsed"))
            continue
        metric, direction = parsed
        if metric not in metrics:
            checks.append(EffectCheck(text, metric, direction, "live"))  # measured after the next round
            continue
        r = metrics[metric]
        if not (np.isfinite(r.ci_low) and np.isfinite(r.ci_high)):
            status = "inconclusive"
        elif direction == "increase":
            status = "held" if r.ci_low > 0 else "contradicted" if r.ci_high < 0 else "inconclusive"
        elif direction == "decrease":
            status = "held" if r.ci_high < 0 else "contradicted" if r.ci_low > 0 else "inconclusive"
        else:
            tol = t.unchanged_tolerance
            inside = -tol <= r.ci_low and r.ci_high <= tol
            status = "held" if inside else "contradicted" if (r.ci_low > tol or r.ci_high < -tol) else "inconclusive"
        checks.append(EffectCheck(text, metric, direction, status))
    return checks


def decide(main: Arm, cand: Arm, sample: Sample, predicted: list[str], t: GateThresholds,
           new_error_findings: list[str] | None = None, seed: int = 0) -> GateResult:
    """Run every check; the candidate is merged only if all pass."""
    checks: list[dict] = []

    def check(name: str, passed: bool, detail: str) -> None:
        checks.append({"name": name, "passed": bool(passed), "detail": detail})

    if cand.failed:
        check("execution", False, f"candidate harness failed in the sandbox: {cand.failed}")
        return GateResult("reject", [checks[-1]["detail"]], checks, {})
    if main.failed:
        # main itself cannot run on this sample: compare the candidate against nothing but absolutes
        check("baseline", True, f"main failed in the sandbox ({main.failed}); absolute checks only")

    metrics = paired_metrics(main, cand, sample, t, seed=seed)
    m = metrics
    check("execution", m["error_rate"].candidate <= t.max_error_rate,
          f"error rate {m['error_rate'].candidate:.3f} (max {t.max_error_rate})")
    auc = m["reward_auc"]
    relative = main.failed is None  # a broken main is no baseline: only absolute checks then
    check("reward_auc", not relative or not (auc.delta < -t.max_auc_drop and auc.ci_high < 0),
          f"AUC vs verifier {auc.main:.3f} -> {auc.candidate:.3f} (delta CI [{auc.ci_low:+.3f}, {auc.ci_high:+.3f}])")
    hack = m["hack_rate"]
    check("hack_rate", not relative or not (hack.delta > t.max_hack_rate_rise and hack.ci_low > 0),
          f"paid verified failures {hack.main:.3f} -> {hack.candidate:.3f} (CI [{hack.ci_low:+.3f}, {hack.ci_high:+.3f}])")
    sig = m["signal_share"]
    check("signal_share", not relative or not (sig.delta < -t.max_signal_drop and sig.ci_high < 0),
          f"groups with signal {sig.main:.3f} -> {sig.candidate:.3f} (CI [{sig.ci_low:+.3f}, {sig.ci_high:+.3f}])")
    check("kept_share", m["kept_share"].candidate >= t.min_kept_share,
          f"kept {m['kept_share'].candidate:.3f} of trajectories (min {t.min_kept_share})")
    if new_error_findings is not None:
        check("diagnostics", not new_error_findings,
              "no new error-severity findings" if not new_error_findings
              else "new error findings: " + ", ".join(new_error_findings))

    effects = check_effects(predicted, metrics, t)
    measurable = [e for e in effects if e.status not in ("live", "unparsed")]
    contradicted = [e.text for e in effects if e.status == "contradicted"]
    if contradicted:
        check("predicted_effect", False, "contradicted: " + "; ".join(contradicted))
    elif measurable and not any(e.status == "held" for e in measurable):
        check("predicted_effect", False, "no measurable predicted effect held: "
              + "; ".join(f"{e.text} ({e.status})" for e in measurable))
    else:
        held = [e.text for e in effects if e.status == "held"]
        live = [e.text for e in effects if e.status == "live"]
        check("predicted_effect", True, ("held: " + "; ".join(held) if held else "")
              + (" live (checked next round): " + "; ".join(live) if live else "") or "no prediction to check")

    failed = [c["detail"] for c in checks if not c["passed"]]
    return GateResult("reject" if failed else "merge", failed, checks, metrics, effects)

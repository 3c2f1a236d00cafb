"""The trusted gate: compare a candidate harness with ``main`` on the same archived sample.

Inputs are what harness code produced in the sandbox (rewards, keep-masks, errors)
and what the trusted verifier stored in the archive (``verified``).  Every metric,
confidence interval and the decision is computed here, on the host, and an adversary
is assumed to have read this file.

- Rewards are validated here: non-finite, outside the domain's ``reward_range`` or
  beyond float32 counts as an error of that trajectory, which then earns the bottom
  of the range in every metric.
- Payment of wrong answers is measured by mass (``failure_pay``), not only above a
  pay line (``hack_rate``), on what the candidate's filters keep: the training batch.
- CIs are paired percentile bootstraps over GRPO groups (a resample draws whole
  groups; both arms are measured on the same draw), widened outward when a resample
  leaves a metric undefined.
- Signal among failures is harm: a group whose kept trajectories hold no verified success must
  stay flat.  Its spread is measured by mass (``failure_spread``) and by share of such groups
  (``flat_failure_share``), with a margin of zero: any rise over ``main`` rejects.
- Harm is judged by non-inferiority and the result has three values: ``merge``,
  ``reject`` or ``undecided`` (the caller re-runs on a larger sample, then turns what is
  still undecided into a rejection with :func:`insufficient`).

Example::

    result = decide(main_arm, cand_arm, sample, ["reward_auc increase: boxed answers count"],
                    GateThresholds(), reward_range=(0.0, 1.0))
    if result.decision == "undecided":
        result = insufficient(decide(..., larger_sample, ...))
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from meta_agent.bootstrap import auc_draws, bootstrap_ci, failure_spread_parts, group_draws, ratio_draws
from meta_agent.config import GateThresholds
from meta_agent.digest import TREND_FIELDS

GATE_METRICS = ("error_rate", "reward_auc", "hack_rate", "failure_pay", "miss_rate", "signal_share",
                "kept_share", "mean_reward", "failure_spread", "flat_failure_share")
LIVE_METRICS = tuple(m for m in TREND_FIELDS if m not in GATE_METRICS)
"""Digest fields a prediction may name: measured by the live check after the next round."""
HARMS = {"hack_rate": "rise", "failure_pay": "rise", "reward_auc": "drop", "signal_share": "drop"}
FLAT_HARMS = ("failure_spread", "flat_failure_share")
"""Spread of reward among failures: margin zero, judged on the point values (any rise is harm)."""
NOT_ENOUGH = "not enough evidence: "
FLOAT32_MAX = float(np.finfo(np.float32).max)
_EFFECT = re.compile(r"^\s*([a-z_]+)\s+(increase|decrease|unchanged)\b", re.IGNORECASE)
_WHY = {"error_rate": "no trajectory", "kept_share": "no trajectory", "mean_reward": "nothing kept",
        "hack_rate": "no kept verified failure", "failure_pay": "no kept verified failure",
        "miss_rate": "no kept verified success", "signal_share": "no group with a kept trajectory",
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
class EffectCheck:
    text: str
    metric: str | None
    direction: str | None  # increase | decrease | unchanged
    kind: str | None  # benefit (increase/decrease) | guard (unchanged)
    status: str  # held | contradicted | inconclusive | live | unknown | unparsed


@dataclass
class GateResult:
    decision: str  # merge | reject | undecided
    reasons: list[str]  # details of the failed checks
    checks: list[dict]  # {"name", "passed", "detail"} plus "undecided": True where undecided
    metrics: dict[str, MetricResult]
    effects: list[EffectCheck] = field(default_factory=list)
    probation: bool = False  # merged on benefits only the next live round can measure
    undecided: list[str] = field(default_factory=list)  # details of the undecided checks
    invalid_rewards: dict[str, int] = field(default_factory=dict)  # per arm, beyond harness errors

    def to_dict(self) -> dict:
        return {
            "decision": self.decision,
            "reasons": self.reasons,
            "undecided": self.undecided,
            "probation": self.probation,
            "checks": self.checks,
            "metrics": {k: asdict(v) for k, v in self.metrics.items()},
            "effects": [asdict(e) for e in self.effects],
            "invalid_rewards": self.invalid_rewards,
        }


# --- metrics -------------------------------------------------------------------------------------

@dataclass
class _Scored:
    """An arm as the gate measures it: valid rewards, errors at the bottom of the range."""

    reward: np.ndarray
    norm: np.ndarray  # reward mapped into [0, 1]
    keep: np.ndarray
    error: np.ndarray  # harness errors and invalid rewards
    invalid: dict[str, int]  # invalid rewards on trajectories the harness did not mark as errors


def _score(arm: Arm, reward_range: tuple[float, float]) -> _Scored:
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
    return _Scored(reward, (reward - lo) / (hi - lo), np.asarray(arm.keep, bool), error, invalid)


def _ratio_parts(s: _Scored, sample: Sample, t: GateThresholds) -> dict[str, tuple[np.ndarray, np.ndarray]]:
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
    signal = (count >= 2) & (top - bottom > t.signal_min_spread)
    everyone = per_group(np.ones(len(g), bool))
    spread, spreads, flat_groups = failure_spread_parts(s.norm, v, kept, g, n_groups)
    return {
        "error_rate": (per_group(s.error), everyone),
        "hack_rate": (per_group(fail & paid), per_group(fail)),
        "failure_pay": (per_group(fail * s.norm), per_group(fail)),
        "miss_rate": (per_group(succ & ~paid), per_group(succ)),
        "signal_share": (signal.astype(float), (count >= 1).astype(float)),
        "kept_share": (count, everyone),
        "mean_reward": (per_group(kept * s.reward), count),
        "failure_spread": (spread, flat_groups),
        "flat_failure_share": (spreads, flat_groups),
    }


def _draws(name: str, s: _Scored, parts: dict, sample: Sample, weights: np.ndarray) -> np.ndarray:
    if name == "reward_auc":  # over all trajectories: a filter cannot hide a mis-ranked reward
        return auc_draws(s.reward, sample.verified, sample.group, weights)
    return ratio_draws(weights, *parts[name])


def _paired_metrics(main: _Scored, cand: _Scored, sample: Sample, t: GateThresholds,
                    seed: int = 0) -> dict[str, MetricResult]:
    """Point estimates and paired bootstrap CIs of the delta for every gate metric."""
    n_groups = sample.n_groups
    draws = group_draws(n_groups, t.bootstrap_samples, np.random.default_rng(seed))
    ones = np.ones((1, n_groups))
    parts_m, parts_c = _ratio_parts(main, sample, t), _ratio_parts(cand, sample, t)
    out: dict[str, MetricResult] = {}
    for name in GATE_METRICS:
        m, c = float(_draws(name, main, parts_m, sample, ones)[0]), float(_draws(name, cand, parts_c, sample, ones)[0])
        deltas = _draws(name, cand, parts_c, sample, draws) - _draws(name, main, parts_m, sample, draws)
        lo, hi = bootstrap_ci(deltas, t.confidence)
        out[name] = MetricResult(name, m, c, c - m, lo, hi, int(np.isnan(deltas).sum()))
    return out


def _why_undefined(name: str, r: MetricResult, sample: Sample) -> str:
    if name == "reward_auc":
        return "no verified success" if not sample.verified.any() else "no verified failure"
    arms = [f"{arm}: {_WHY[name]}" for arm, x in (("main", r.main), ("candidate", r.candidate)) if np.isnan(x)]
    return "; ".join(arms)


# --- checks ---------------------------------------------------------------------------------------

def _harm_check(name: str, r: MetricResult, margin: float, identical: bool, sample: Sample, t: GateThresholds) -> dict:
    rise = HARMS[name] == "rise"
    figures = f"{r.main:.3f} -> {r.candidate:.3f}, delta CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
    bound = f"margin {'+' if rise else '-'}{margin}"
    if identical:
        return {"name": name, "passed": True,
                "detail": f"{name} {figures}: candidate's rewards and keep-mask equal main's on every trajectory,"
                          " so the change is zero by construction"}
    if np.isnan(r.main) or np.isnan(r.candidate):
        return {"name": name, "passed": False, "undecided": True,
                "detail": f"{NOT_ENOUGH}{name} undefined on this sample ({_why_undefined(name, r, sample)})"}
    if np.isnan(r.ci_low) or np.isnan(r.ci_high):
        return {"name": name, "passed": False, "undecided": True,
                "detail": f"{NOT_ENOUGH}{name} delta CI undefined (undefined on {r.undefined_draws} of "
                          f"{t.bootstrap_samples} resamples of groups)"}
    inside = r.ci_high < margin if rise else r.ci_low > -margin
    harmed = r.ci_low > 0 if rise else r.ci_high < 0
    if inside:
        return {"name": name, "passed": True, "detail": f"{name} {figures}: within {bound}"}
    if harmed:
        return {"name": name, "passed": False,
                "detail": f"{name} {figures}: {'rises' if rise else 'drops'} (CI clear of zero), not within {bound}"}
    return {"name": name, "passed": False, "undecided": True,
            "detail": f"{NOT_ENOUGH}{name} {figures}: not shown within {bound}"}


def _flat_check(name: str, r: MetricResult) -> dict:
    """Margin zero: the candidate may not spread rewards among failures more than ``main`` does.

    Both arms are measured on the same trajectories, so a rise is observed, not estimated: any
    rise rejects, however small (0.015 against 0 is a full-size GRPO push toward a wrong answer).
    An arm without such a group spreads nothing.
    """
    main, cand = (0.0 if np.isnan(x) else x for x in (r.main, r.candidate))
    figures = f"{name} {main:.4f} -> {cand:.4f} over groups with no kept verified success"
    if cand <= main + 1e-9:
        return {"name": name, "passed": True, "detail": f"{figures}: no rise (margin 0)"}
    return {"name": name, "passed": False, "detail": f"{figures}: rises; reward spread among failures trains "
            "toward whatever it pays (margin 0)"}


def parse_effect(text: str) -> tuple[str, str] | None:
    """``"reward_auc increase: because ..."`` -> ("reward_auc", "increase")."""
    match = _EFFECT.match(text)
    return (match.group(1).lower(), match.group(2).lower()) if match else None


def check_effects(predicted: list[str], metrics: dict[str, MetricResult], t: GateThresholds,
                  identical: bool = False) -> list[EffectCheck]:
    """Judge each ``Predicted-Effect``; with ``identical`` arms a guard holds by construction."""
    checks = []
    for text in predicted:
        parsed = parse_effect(text)
        if parsed is None:
            checks.append(EffectCheck(text, None, None, None, "unparsed"))
            continue
        metric, direction = parsed
        kind = "guard" if direction == "unchanged" else "benefit"
        r = metrics.get(metric)
        if r is None:
            status = "live" if metric in LIVE_METRICS else "unknown"
        elif kind == "guard" and identical:
            status = "held"
        elif np.isnan(r.ci_low) or np.isnan(r.ci_high):
            status = "inconclusive"
        elif direction == "increase":
            status = "held" if r.ci_low > 0 else "contradicted" if r.ci_high < 0 else "inconclusive"
        elif direction == "decrease":
            status = "held" if r.ci_high < 0 else "contradicted" if r.ci_low > 0 else "inconclusive"
        else:
            tol = t.unchanged_tolerance
            inside = -tol <= r.ci_low and r.ci_high <= tol
            status = "held" if inside else "contradicted" if (r.ci_low > tol or r.ci_high < -tol) else "inconclusive"
        checks.append(EffectCheck(text, metric, direction, kind, status))
    return checks


def _effects_check(effects: list[EffectCheck], bookkeeping_only: bool = False) -> tuple[dict, bool]:
    """The ``predicted_effect`` check and whether a merge would be on probation.

    ``bookkeeping_only``: the branch changes no reward, filter, prompt or knob (only
    diagnostics, skills or the journal) and its outputs equal main's, so it trains exactly
    as main does and needs no predicted benefit; a prediction it does make still counts.
    """
    def texts(es: list[EffectCheck]) -> str:
        return "; ".join(f"{e.text} ({e.status})" for e in es)

    benefits = [e for e in effects if e.kind == "benefit" and e.status != "unknown"]
    contradicted = [e for e in effects if e.status == "contradicted"]
    offline = [e for e in benefits if e.status != "live"]
    live = [e for e in effects if e.status == "live"]
    open_guards = [e for e in effects if e.kind == "guard" and e.status == "inconclusive"]
    name = "predicted_effect"
    if not benefits and bookkeeping_only and not contradicted:
        return {"name": name, "passed": True, "detail": "diagnostics/skills/journal only, with rewards and keep "
                "masks identical to main's: trains exactly as main, nothing to predict"}, False
    if not benefits:
        return {"name": name, "passed": False, "detail": "no predicted benefit (an increase or decrease of a gate "
                "metric or digest field)" + (": " + texts(effects) if effects else "")}, False
    if contradicted:
        return {"name": name, "passed": False, "detail": "contradicted: " + texts(contradicted)}, False
    missing = []
    if offline and not any(e.status == "held" for e in offline):
        missing.append("no measurable predicted benefit held: " + texts(offline))
    if open_guards:
        missing.append("unchanged not shown within tolerance: " + texts(open_guards))
    if missing:
        return {"name": name, "passed": False, "undecided": True, "detail": NOT_ENOUGH + "; ".join(missing)}, False
    held = [e for e in effects if e.status == "held"]
    detail = "held: " + texts(held) if held else ""
    if live:
        detail += ("; " if detail else "") + "checked live next round: " + texts(live)
    if not offline:
        detail = "probation, no benefit measurable offline; " + detail
    return {"name": name, "passed": True, "detail": detail}, not offline


def _state(check: dict) -> str:
    return "undecided" if check.get("undecided") else "passed" if check["passed"] else "failed"


def _result(checks: list[dict], metrics: dict[str, MetricResult], effects: list[EffectCheck], probation: bool,
            invalid: dict[str, int]) -> GateResult:
    failed = [c["detail"] for c in checks if _state(c) == "failed"]
    undecided = [c["detail"] for c in checks if _state(c) == "undecided"]
    decision = "reject" if failed else "undecided" if undecided else "merge"
    return GateResult(decision, failed, checks, metrics, effects, probation and decision == "merge", undecided, invalid)


def decide(main: Arm, cand: Arm, sample: Sample, predicted: list[str], t: GateThresholds, *,
           reward_range: tuple[float, float], extra_checks: list[dict] | None = None,
           new_error_findings: list[str] | None = None, seed: int = 0, bookkeeping_only: bool = False) -> GateResult:
    """Run every check: any failure rejects, else anything undecided leaves it undecided, else merge.

    ``reward_range`` is the domain's (trusted); ``extra_checks`` are the caller's own checks
    (``{"name", "passed", "detail"}``, optionally ``"undecided": True``), judged alike.
    ``bookkeeping_only`` (the caller saw that the branch changes only diagnostics, skills or the
    journal) lets a branch whose outputs equal main's merge without a predicted benefit.
    Raises ``ValueError`` when ``main`` failed: without a baseline there is no verdict.
    """
    lo, hi = reward_range
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi and max(abs(lo), abs(hi)) <= FLOAT32_MAX):
        raise ValueError(f"reward_range {reward_range} is not a finite float32 interval")
    if main.failed:
        raise ValueError(f"main failed in the sandbox ({main.failed}): no verdict without a baseline")
    extra = [dict(c) for c in extra_checks or []]
    for c in extra:
        if not {"name", "passed", "detail"} <= set(c):
            raise ValueError(f"an extra check needs name, passed and detail: {c}")
    n = len(sample.group)
    if len(sample.verified) != n or any(len(x) != n for a in (main, cand) for x in (a.reward, a.keep, a.error)):
        raise ValueError("arms and sample must be aligned trajectory by trajectory")
    if cand.failed:
        check = {"name": "execution", "passed": False,
                 "detail": f"candidate harness failed in the sandbox: {cand.failed}"}
        return _result([check, *extra], {}, [], False, {})

    sm, sc = _score(main, reward_range), _score(cand, reward_range)
    metrics = _paired_metrics(sm, sc, sample, t, seed=seed)
    identical = bool(np.array_equal(sm.reward, sc.reward) and np.array_equal(sm.keep, sc.keep))
    invalid = {"main": sum(sm.invalid.values()), "candidate": sum(sc.invalid.values())}
    err, kept = metrics["error_rate"].candidate, metrics["kept_share"].candidate
    checks = [
        {"name": "execution", "passed": bool(err <= t.max_error_rate),
         "detail": f"error rate {err:.3f} incl. invalid rewards (max {t.max_error_rate})"},
        # one reward beyond float32 turns a whole batch's advantages into inf/nan: no allowance
        {"name": "reward_validity", "passed": invalid["candidate"] == 0,
         "detail": f"{invalid['candidate']} of {n} candidate rewards invalid for range {list(reward_range)} "
                   f"({', '.join(f'{k} {v}' for k, v in sc.invalid.items())}), counted as errors"},
        {"name": "kept_share", "passed": bool(kept >= t.min_kept_share),
         "detail": f"kept {kept:.3f} of trajectories (min {t.min_kept_share})"},
    ]
    margins = {"hack_rate": t.hack_rate_margin, "failure_pay": t.failure_pay_margin,
               "reward_auc": t.auc_margin, "signal_share": t.signal_margin}
    checks += [_harm_check(name, metrics[name], margins[name], identical, sample, t) for name in HARMS]
    checks += [_flat_check(name, metrics[name]) for name in FLAT_HARMS]
    if new_error_findings is not None:
        checks.append({"name": "diagnostics", "passed": not new_error_findings,
                       "detail": "no new error-severity findings" if not new_error_findings
                       else "new error findings: " + ", ".join(new_error_findings)})
    effects = check_effects(predicted, metrics, t, identical)
    effect_check, probation = _effects_check(effects, bookkeeping_only and identical)
    return _result([*checks, effect_check, *extra], metrics, effects, probation, invalid)


def insufficient(result: GateResult) -> GateResult:
    """An ``undecided`` result after the last, largest sample: a rejection for lack of evidence."""
    if result.decision != "undecided":
        raise ValueError(f"only an undecided result can lack evidence, not a {result.decision!r} one")
    reasons = [r if r.startswith(NOT_ENOUGH) else NOT_ENOUGH + r for r in result.undecided]
    return replace(result, decision="reject", reasons=reasons, undecided=[], probation=False)

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
- Pay for a verified failure that main does not make rejects, trajectory by trajectory, in every
  group (``failure_pay_new``, margin zero): both arms score the same answers, so it is a fact, not
  noise.  Only a format credit the candidate's ``harness.yaml`` declares, at most the trusted
  ``failure_pay`` margin, is allowed, and shown in the check.
- Signal among failures is harm: a group whose kept trajectories hold no verified success must
  stay flat.  Its spread is measured by mass (``failure_spread``) and by share of such groups
  (``flat_failure_share``), with a margin of zero: any rise over ``main`` rejects.
- Harm is judged by non-inferiority and the result has three values: ``merge``,
  ``reject`` or ``undecided`` (the caller re-runs on a larger sample, then turns what is
  still undecided into a rejection with :func:`insufficient`).

The decision lives here (:func:`decide`); what it combines lives in ``meta_agent/judge/``:
``metrics`` (arms, sample, paired CIs), ``harm_checks`` (non-inferiority and margin-zero
checks), ``effects`` (predicted effects); the probe session (``judge/probe``) and other callers
add their checks through ``extra_checks``.

Example::

    result = decide(main_arm, cand_arm, sample, ["reward_auc increase: boxed answers count"],
                    GateThresholds(), reward_range=(0.0, 1.0))
    if result.decision == "undecided":
        result = insufficient(decide(..., larger_sample, ...))
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from meta_agent.config import GateThresholds
from meta_agent.judge.effects import LIVE_METRICS, EffectCheck, check_effects, effects_check, parse_effect
from meta_agent.judge.harm_checks import FLAT_HARMS, HARMS, NOT_ENOUGH, flat_check, harm_check, new_pay_check
from meta_agent.judge.metrics import FLOAT32_MAX, GATE_METRICS, Arm, MetricResult, Sample, paired_metrics, score
from meta_agent.judge.verifier_order import settle_auc

__all__ = ["Arm", "EffectCheck", "FLAT_HARMS", "GATE_METRICS", "GateResult", "HARMS", "LIVE_METRICS", "MetricResult",
           "NOT_ENOUGH", "Sample", "check_effects", "decide", "insufficient", "parse_effect"]


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
           new_error_findings: list[str] | None = None, seed: int = 0, bookkeeping_only: bool = False,
           extra_metrics: dict[str, MetricResult] | None = None, format_credit: float = 0.0) -> GateResult:
    """Run every check: any failure rejects, else anything undecided leaves it undecided, else merge.

    ``reward_range`` is the domain's (trusted); ``extra_checks`` are the caller's own checks
    (``{"name", "passed", "detail"}``, optionally ``"undecided": True``), judged alike.
    ``bookkeeping_only`` (the caller saw that the branch changes only diagnostics, skills or the
    journal) lets a branch whose outputs equal main's merge without a predicted benefit.
    ``extra_metrics``: paired metrics the caller measured beside the sample (the reward audit,
    ``judge.audit_contrast``); predictions naming them are judged on them like the gate's own.
    ``format_credit``: what the candidate's ``harness.yaml`` declares it may pay a verified failure
    (``harm_checks.new_pay_check``); 0 without a declaration.
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

    sm, sc = score(main, reward_range), score(cand, reward_range)
    metrics = paired_metrics(sm, sc, sample, t, seed=seed)
    metrics.update({k: v for k, v in (extra_metrics or {}).items() if k not in metrics})
    same_rewards = bool(np.array_equal(sm.reward, sc.reward))
    identical = same_rewards and bool(np.array_equal(sm.keep, sc.keep))
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
    checks += [settle_auc(harm_check(name, metrics[name], margins[name], identical, sample, t, same_rewards), sm, sc,
                          sample.verified) for name in HARMS]  # undefined AUC: meta_agent/judge/verifier_order.py
    checks += [flat_check(name, metrics[name]) for name in FLAT_HARMS]
    checks.append(new_pay_check(sm, sc, ~sample.verified, format_credit, t.failure_pay_margin, reward_range))
    if new_error_findings is not None:
        checks.append({"name": "diagnostics", "passed": not new_error_findings,
                       "detail": "no new error-severity findings" if not new_error_findings
                       else "new error findings: " + ", ".join(new_error_findings)})
    effects = check_effects(predicted, metrics, t, identical)
    effect_check, probation = effects_check(effects, bookkeeping_only and identical)
    return _result([*checks, effect_check, *extra], metrics, effects, probation, invalid)


def insufficient(result: GateResult) -> GateResult:
    """An ``undecided`` result after the last, largest sample: a rejection for lack of evidence."""
    if result.decision != "undecided":
        raise ValueError(f"only an undecided result can lack evidence, not a {result.decision!r} one")
    reasons = [r if r.startswith(NOT_ENOUGH) else NOT_ENOUGH + r for r in result.undecided]
    return replace(result, decision="reject", reasons=reasons, undecided=[], probation=False)

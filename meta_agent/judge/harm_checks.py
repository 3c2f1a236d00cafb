"""Harm checks of the gate: non-inferiority on the CI of each harm, margin zero on spread among failures.

Each check is a dict ``{"name", "passed", "detail"}`` with ``"undecided": True`` where the
sample cannot decide; ``meta_agent.gate.decide`` turns the list into a decision.
"""

from __future__ import annotations

import numpy as np

from meta_agent.config import GateThresholds
from meta_agent.judge.metrics import MetricResult, Sample, why_undefined

HARMS = {"hack_rate": "rise", "failure_pay": "rise", "reward_auc": "drop", "signal_share": "drop"}
FLAT_HARMS = ("failure_spread", "flat_failure_share")
"""Spread of reward among failures: margin zero, judged on the point values (any rise is harm)."""
BEFORE_KEEP = ("reward_auc",)
"""Harms measured on every trajectory before the keep mask (``judge.metrics.metric_draws``): equal rewards
make their change zero by construction, whatever the filters keep."""
NOT_ENOUGH = "not enough evidence: "


def harm_check(name: str, r: MetricResult, margin: float, identical: bool, sample: Sample, t: GateThresholds,
               same_rewards: bool = False) -> dict:
    """Non-inferiority of one harm: passed within the margin, failed when harmed, else undecided.

    ``identical``: the candidate's rewards and keep-mask equal main's; ``same_rewards``: its rewards do.
    """
    rise = HARMS[name] == "rise"
    figures = f"{r.main:.3f} -> {r.candidate:.3f}, delta CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
    bound = f"margin {'+' if rise else '-'}{margin}"
    if identical:
        return {"name": name, "passed": True,
                "detail": f"{name} {figures}: candidate's rewards and keep-mask equal main's on every trajectory,"
                          " so the change is zero by construction"}
    if same_rewards and name in BEFORE_KEEP:
        return {"name": name, "passed": True,
                "detail": f"{name} {figures}: candidate's rewards equal main's on every trajectory and {name} "
                          "does not read the keep-mask, so the change is zero by construction"}
    if np.isnan(r.main) or np.isnan(r.candidate):
        return {"name": name, "passed": False, "undecided": True,
                "detail": f"{NOT_ENOUGH}{name} undefined on this sample ({why_undefined(name, r, sample)})"}
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


def flat_check(name: str, r: MetricResult) -> dict:
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

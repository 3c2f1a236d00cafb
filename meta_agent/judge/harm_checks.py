"""Harm checks of the gate: non-inferiority on the CI of each harm, margin zero on spread among failures and on
pay for a verified failure that main does not make (``new_pay_check``).

Each check is a dict ``{"name", "passed", "detail"}`` with ``"undecided": True`` where the
sample cannot decide; ``meta_agent.gate.decide`` turns the list into a decision.
"""

from __future__ import annotations

import numpy as np

from meta_agent.config import GateThresholds
from meta_agent.judge.metrics import MetricResult, Sample, Scored, why_undefined

HARMS = {"hack_rate": "rise", "failure_pay": "rise", "reward_auc": "drop", "signal_share": "drop"}
FLAT_HARMS = ("failure_spread", "flat_failure_share")
"""Spread of reward among failures: margin zero, judged on the point values (any rise is harm)."""
BEFORE_KEEP = ("reward_auc",)
"""Harms measured on every trajectory before the keep mask (``judge.metrics.metric_draws``): equal rewards
make their change zero by construction, whatever the filters keep."""
NOT_ENOUGH = "not enough evidence: "
PAY_TOLERANCE = 1e-9
"""Float rounding only: both arms score the same answers, so any larger difference is the reward's code."""


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


def pay_floor(reward_range: tuple[float, float]) -> float:
    """Where pay starts on the [0, 1] scale: the bottom of the range, or its 0 where it holds one (code and SWE
    pay -1 .. 1: -1 is a penalty and 0 nothing, so only what is above 0 is pay), as the probe's ``unpaid``."""
    lo, hi = reward_range
    return (min(max(lo, 0.0), hi) - lo) / (hi - lo)


def new_pay_check(main: Scored, cand: Scored, failures: np.ndarray, format_credit: float = 0.0,
                  credit_cap: float = 0.0, reward_range: tuple[float, float] = (0.0, 1.0)) -> dict:
    """Margin zero on pay for verified failures, trajectory by trajectory, in every group.

    Both arms score the very same archived answers, so what a reward pays a verified failure is a fact of its
    code, not an estimate: any kept verified failure the candidate pays more than main does (normalised
    reward above :func:`pay_floor`; a trajectory a filter drops is paid nothing) rejects, however small the
    sum and whether or not its group holds a success.  ``format_credit``: the bound the candidate's
    ``harness.yaml`` declares on what it pays a verified failure (a credit for form); pay up to it is
    allowed, shown here, and checked live by the tripwire.  A declaration above ``credit_cap`` (the gate's
    trusted ``failure_pay`` margin) rejects.
    """
    if not 0.0 <= format_credit <= credit_cap:
        return {"name": "failure_pay_new", "passed": False,
                "detail": f"harness.yaml declares a format credit of {format_credit:g} for verified failures, "
                          f"beyond the trusted cap of {credit_cap:g} (the gate's failure_pay margin)"}
    failed, floor = np.asarray(failures, bool), pay_floor(reward_range)
    # a softer penalty (-1 -> -0.5 in -1 .. 1) is no pay
    paid_m = np.where(main.keep & failed, np.maximum(main.norm - floor, 0.0), 0.0)
    paid_c = np.where(cand.keep & failed, np.maximum(cand.norm - floor, 0.0), 0.0)
    over = failed & (paid_c > np.maximum(paid_m, format_credit) + PAY_TOLERANCE)
    credit = f"; declared format credit {format_credit:g}" if format_credit else ""
    if not over.any():
        return {"name": "failure_pay_new", "passed": True,
                "detail": f"no verified failure ({int(failed.sum())} in the sample) is paid more than main pays "
                          f"it{credit} (margin 0: pay on identical answers is deterministic)"}
    extra = paid_c[over] - paid_m[over]
    return {"name": "failure_pay_new", "passed": False,
            "detail": f"{int(over.sum())} of {int(failed.sum())} verified failures paid more than main pays them: "
                      f"up to {float(paid_c[over].max()):.3f} (+{float(extra.min()):.3f} to +{float(extra.max()):.3f} "
                      f"on the [0, 1] scale){credit}; pay for a verified failure on identical answers is "
                      "deterministic, not noise (margin 0)"}

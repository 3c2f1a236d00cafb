"""A candidate whose rewards differ from main's only toward the verifier's outcome cannot rank worse.

``reward_auc`` asks whether a reward ranks verified successes above verified failures.  It is undefined on a sample
with no verified success (every early round of a small policy) or none failed, and the gate's harm check is then
undecided: once the sample cannot grow, a rejection for lack of evidence.  But when every reward the candidate
changes moves toward the verified outcome (a failure paid less, a success paid more), no pair of a success and a
failure is ranked worse than main ranks it, on this sample or any resample of it, so the AUC cannot fall: the check
passes by construction, as it does for identical rewards.  Only that check is settled here; pay and spread among
failures, the probe and the audit judge the candidate as before (a reward that unpays half of a flat group's
failures moves each toward the verifier and is still rejected for the spread it creates).

The sample shows only one side of the ranking (no success, or no failure): a reward that pays nothing at all also
"moves toward the verifier" on a sample of failures.  So a settled check stands only when the reward audit, on
constructed answers of both kinds, finds the candidate leaving no larger share of right answers unpaid and paying
no larger share of wrong ones than main (:func:`order_check`, margin zero: both score the same answers); without
an audit the settlement is undone (undecided).
"""

from __future__ import annotations

import numpy as np

from meta_agent.judge.harm_checks import PAY_TOLERANCE
from meta_agent.judge.metrics import Scored

__all__ = ["SETTLED", "order_check", "settle_auc", "settled", "toward_verifier"]

SETTLED = "reward_auc cannot fall"


def toward_verifier(main: Scored, cand: Scored, verified: np.ndarray) -> bool:
    """Some reward differs, and each that does moves toward the verifier: up on a verified success, down on a
    verified failure (both arms scored on the [0, 1] scale; a harness error counts at the bottom, as the gate
    counts it)."""
    v = np.asarray(verified, bool)
    up, down = cand.norm > main.norm + PAY_TOLERANCE, cand.norm < main.norm - PAY_TOLERANCE
    return bool((up | down).any() and not (up & ~v).any() and not (down & v).any())


def settle_auc(check: dict, main: Scored, cand: Scored, verified: np.ndarray) -> dict:
    """``check`` unchanged, unless it is an undecided ``reward_auc`` and the candidate moves only toward the
    verifier: then passed, saying why."""
    if check.get("name") != "reward_auc" or not check.get("undecided") or not toward_verifier(main, cand, verified):
        return check
    return {"name": "reward_auc", "passed": True,
            "detail": f"{SETTLED}: every reward the candidate changes moves toward the verifier's outcome "
                      "(verified failures paid less, verified successes more), so no success-failure pair ranks "
                      f"worse on any resample (was: {check['detail']})"}


def settled(checks: list[dict]) -> bool:
    """Whether ``checks`` hold a ``reward_auc`` passed by :func:`settle_auc`."""
    return any(c.get("name") == "reward_auc" and c.get("passed") and str(c.get("detail", "")).startswith(SETTLED)
               for c in checks)


def order_check(audit_metrics: dict) -> dict:
    """The other side of a settled ``reward_auc``, on the audit's constructed answers: no rise of right answers
    left unpaid or wrong ones paid (point figures; both arms scored the same answers).  Undecided without them."""
    miss, hack = audit_metrics.get("audit_miss_rate"), audit_metrics.get("audit_hack_rate")
    name = "reward_auc_order"
    if miss is None or hack is None or any(np.isnan(x) for r in (miss, hack) for x in (r.main, r.candidate)):
        return {"name": name, "passed": False, "undecided": True,
                "detail": f"not enough evidence: {SETTLED} on the sample's archived answers, but no reward audit "
                          "measured the side of the ranking the sample lacks"}
    ok = miss.candidate <= miss.main + PAY_TOLERANCE and hack.candidate <= hack.main + PAY_TOLERANCE
    figures = (f"audit_miss_rate {miss.main:.3f} -> {miss.candidate:.3f}, audit_hack_rate {hack.main:.3f} -> "
               f"{hack.candidate:.3f} on the same constructed answers")
    return {"name": name, "passed": bool(ok),
            "detail": f"{SETTLED} on the sample, and the audit agrees: {figures}" if ok else
                      f"{SETTLED} on the sample's archived answers only: the audit finds it ranking worse ({figures})"}

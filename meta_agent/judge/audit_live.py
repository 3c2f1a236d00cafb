"""Live check of a prediction on an audit field: the merge's own reward contrast on the next round's answers.

A merge predicting ``audit_miss_rate decrease`` changed the reward.  Round n's digest audits main, which
moves with the policy's new answers as much as with the merge; the control is to audit the reward before
the merge (the merge commit's first parent) and the merged reward on the *same* constructed answers to
round n's responses (``judge.audit_contrast``).  Ordinary learning cannot make that paired difference,
and another merge of the same round cannot either (each is contrasted with its own parent), so it is
never ``shared``.  Trusted code; a reward that fails its session leaves the prediction unmeasurable.

The contrast also counts pay for verified failures as the tripwire does (issue 45, Deliver 3): a constructed
wrong answer the merge pays more than its parent and more than the ``format_credit`` its ``harness.yaml``
declares (margin zero, any amount) contradicts every audit prediction of that merge, so it is reverted.

``paid_anew`` asks the same of the policy's own answers: the verified failures training paid in round n, as the
policy wrote them, scored by a merge and its parent.  The tripwire blames a merge of any earlier round with it
(``tripwire_revert.revert_on_tripwire``): a reward paying a shape the policy first writes rounds after the merge pays
nothing until then, so the round before the alarm need not hold the merge that pays (issue 45, held-out set g).

    audit = lambda iv: live_contrast(repo, iv.merge_commit, rows, "math", verify, sandbox, settings, (0.0, 1.0))
    measure_audit("audit_miss_rate decrease: ...", audit(iv))    # ("held", {"delta": -0.6, "low": ..., ...})
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import NamedTuple

from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.config import HIGH_REWARD
from meta_agent.judge.audit_contrast import AUDIT_FIELDS, AuditFailed, audit_contrast, declared_credit, newly_wrong
from meta_agent.judge.effects import parse_effect
from meta_agent.judge.harm_checks import PAY_TOLERANCE, pay_floor
from meta_agent.judge.metrics import MetricResult
from meta_agent.judge.reward_audit import Verify, score_calls
from sandboxes.base import Sandbox
from sandboxes.harness_views import trajectory_view

METHOD = "reward audit: the merge's parent vs the merge on this round's answers, paired over groups"
NEW_PAY = "failure_pay_new"
PAID_ANEW_ROWS = 2048
"""Paid failures ``paid_anew`` re-scores at most: one call each in a session already open (milliseconds), so a
round's every paid failure up to this many; past it a draw no harness can predict (``random.SystemRandom``)."""
"""The key of :class:`NewPay` in a live contrast."""


class NewPay(NamedTuple):
    """Verified-wrong constructed answers the merge pays more than its parent, above its declared credit."""

    count: int
    most: float
    credit: float


def is_audit_prediction(text: str) -> bool:
    """Whether a ``Predicted-Effect`` line names an audit field."""
    parsed = parse_effect(text)
    return parsed is not None and parsed[0] in AUDIT_FIELDS


def live_contrast(repo: HarnessRepo, merge_commit: str, rows: list[dict], domain_name: str, verify: Verify,
                  sandbox: Sandbox, settings: BacktestSettings,
                  reward_range: tuple[float, float]) -> dict[str, MetricResult | NewPay] | str | None:
    """The audit fields of the merge's parent (``main``) and the merge (``candidate``) on ``rows``, and under
    ``NEW_PAY`` the failures the merge newly pays beyond its declared credit; why not, as a string, when a
    reward failed its session; None outside math or with nothing to audit."""
    parent = repo.head(f"{merge_commit}^1")
    try:
        contrast = audit_contrast(repo, parent, merge_commit, rows, domain_name, verify, sandbox, settings,
                                  reward_range)
    except AuditFailed as exc:
        return str(exc)
    if contrast is None:
        return None
    rates, worse, _ = contrast
    return {**rates, NEW_PAY: NewPay(int(worse["paid"]), float(worse["most"]), float(worse["credit"]))}


def paid_anew(repo: HarnessRepo, merge_commit: str, rows: list[dict], sandbox: Sandbox, settings: BacktestSettings,
              reward_range: tuple[float, float]) -> NewPay | str:
    """The verified failures training paid in ``rows`` (round n's, as the policy wrote them; every one up to
    ``PAID_ANEW_ROWS``, a draw past it) that the merge pays more than its parent and more than the ``format_credit``
    it declares, margin zero: pay on identical answers is a fact of the code.  Why not, as a string, when a reward
    failed its session (nothing is then blamed on the merge).

        paid_anew(repo, iv.merge_commit, rows, sandbox, settings, (0.0, 1.0))   # NewPay(count=3, most=0.3, ...)
    """
    lo, hi = reward_range
    floor = pay_floor(reward_range)
    paid = sorted((r for r in rows if r.get("split") == "train" and r.get("verified") is not None
                   and float(r["verified"]) < HIGH_REWARD and r.get("response") is not None
                   and r.get("reward") is not None and (float(r["reward"]) - lo) / (hi - lo) > floor + PAY_TOLERANCE),
                  key=lambda r: str(r["traj_id"]))
    if len(paid) > PAID_ANEW_ROWS:
        paid = random.SystemRandom().sample(paid, PAID_ANEW_ROWS)
    credit = declared_credit(repo, merge_commit)
    if not paid:
        return NewPay(0, 0.0, credit)
    calls = [[(trajectory_view(r), float(r["verified"])) for r in paid]]
    scored = []
    for arm, commit in (("the parent", repo.head(f"{merge_commit}^1")), ("the merge", merge_commit)):
        result = score_calls(repo, commit, calls, sandbox, settings, reward_range)
        if isinstance(result, str):
            return f"{arm} {commit[:12]} failed its session: {result}"
        scored.append(result)
    worse = newly_wrong(calls, scored[0], scored[1], reward_range, credit)
    return NewPay(int(worse["paid"]), float(worse["most"]), float(worse["credit"]))


def measure_audit(text: str, contrast: dict[str, MetricResult | NewPay] | str | None,
                  verdict_of: Callable[[str, float, float], str]) -> tuple[str, dict | None]:
    """The verdict on one audit prediction from :func:`live_contrast` and the measured change.

    ``unmeasurable`` without a contrast (a failed session included) or with an undefined rate (no
    verified-right, or no wrong, answer audited); else ``verdict_of(direction, low, high)``, the live
    check's own rule (``live_check._verdict``, passed in: that module imports this one).  ``contradicted``
    whatever the field when the merge newly pays a verified failure beyond its declared credit (``NEW_PAY``).
    """
    metric, direction = parse_effect(text) or ("", "")
    if not isinstance(contrast, dict) or metric not in contrast:
        return "unmeasurable", None
    r = contrast[metric]
    paid = contrast.get(NEW_PAY)
    if isinstance(paid, NewPay) and paid.count > 0 and isinstance(r, MetricResult):
        return "contradicted", {"before": r.main, "after": r.candidate, "delta": r.delta, "low": None, "high": None,
                                "method": f"{METHOD}: {paid.count} verified-wrong answers paid more than the parent "
                                          f"pays them, up to {paid.most:.3f}, above the declared format credit "
                                          f"{paid.credit:g} (margin 0)"}
    if not isinstance(r, MetricResult):
        return "unmeasurable", None
    if math.isnan(r.delta):
        return "unmeasurable", None
    change = {"before": r.main, "after": r.candidate, "delta": r.delta,
              "low": None if math.isnan(r.ci_low) else r.ci_low, "high": None if math.isnan(r.ci_high) else r.ci_high,
              "method": METHOD}
    return verdict_of(direction, r.ci_low, r.ci_high), change

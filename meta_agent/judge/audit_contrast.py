"""The reward audit as a paired contrast: two rewards scored on the same constructed answers.

The digest's audit (``judge.reward_audit``) measures main's reward alone.  A change to the reward is
judged by how its audit differs from the reward it replaces, and ordinary learning cannot produce that
difference: both rewards score the very same answers (same trajectory ids, same drawn forms, each call
in a fresh session of each), so the policy is held fixed.  Two callers:

- the gate (``audit_gate_checks``): main vs the candidate on the backtest sample's rows.  A fall of
  ``audit_miss_rate`` or ``audit_hack_rate`` whose interval excludes zero is a benefit measured at backtest
  time; a candidate that pays any verified-wrong answer more than main does, beyond the format credit its
  ``harness.yaml`` declares, is harmed (margin zero: these are the same answers, a rise is not noise), and
  so is one that leaves more verified answers unpaid without stopping pay for at least as large a share of
  wrong ones;
- the live check (``judge.audit_live``): the merge's parent vs the merge commit on the next round's rows.

Gains (the rates, what a prediction is judged on) are read on the answers said as the policy says its own; harm
(pay for a wrong answer, a rise of unpaid right ones) on every answer, the audit's own shapes included (issue 45:
an audit that says some answers twice to catch pay for them must not credit a reward honest only there).

Intervals are paired percentile bootstraps over GRPO groups (a group's answers share one task), as the
gate's other metrics.

    contrast = audit_contrast(repo, main_commit, cand_commit, rows, "math", verify, sandbox, settings, (0.0, 1.0))
    contrast["audit_miss_rate"].delta, contrast["audit_miss_rate"].ci_high      # -0.6, -0.45
"""

from __future__ import annotations

import random
import secrets
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.bootstrap import bootstrap_ci, group_draws, ratio_draws
from meta_agent.config import HIGH_REWARD, BacktestSettings
from meta_agent.judge.harm_checks import PAY_TOLERANCE, pay_floor
from meta_agent.judge.metrics import MetricResult
from meta_agent.judge.reward_audit import AS_POLICY, AUDITED_DOMAINS, COPY, Verify, audit_calls, score_calls
from meta_agent.judge.reward_reading import read_commit
from sandboxes.base import Sandbox

AUDIT_FIELDS = ("audit_miss_rate", "audit_hack_rate")
BOOTSTRAP_SAMPLES = 1000
CONFIDENCE = 0.95
MIN_GROUPS = 5
"""Groups (tasks) the audited answers must span for an interval: the bootstrap resamples groups, and over
2 or 3 of them it has only a handful of distinct draws, so its "interval" is just the range of their deltas."""


class AuditFailed(RuntimeError):
    """One arm's reward failed in its audit session; ``arm`` says which (``main`` or ``candidate``)."""

    def __init__(self, arm: str, why: str) -> None:
        super().__init__(f"{arm}'s reward failed in the audit session: {why}")
        self.arm = arm


def paired_rates(calls: list[list[tuple[dict, float]]], main_paid: list[list[float | None]],
                 cand_paid: list[list[float | None]], reward_range: tuple[float, float], *,
                 seed: int = 0, as_policy_only: bool = True) -> dict[str, MetricResult]:
    """``audit_miss_rate`` and ``audit_hack_rate`` of both arms on the same answers, with the delta's interval
    (NaN bounds, so nothing is measured to hold, when the answers span fewer than ``MIN_GROUPS`` groups).

    ``as_policy_only``: over the answers said as the policy says its own (a view's ``AS_POLICY``, true where a
    view does not say), the reading of gains; else over all, the reading of harm.  An answer the audit says twice
    where the policy said it once exists to catch pay for it (harm); a reward honest only there gains nothing
    training would see (``tests/test_live_audit.py``'s detector).  A reward that is None (an error) counts as
    unpaid; an answer its row was already sent (``COPY``) is counted once.  Raises ``ValueError`` when the arms
    were not scored on the same calls.
    """
    lo, hi = reward_range
    groups, right, pays = [], [], {"main": [], "candidate": []}
    for k, call in enumerate(calls):
        keep = [not view.get(COPY) and (not as_policy_only or view.get(AS_POLICY, True)) for view, _ in call]
        for arm, paid in (("main", main_paid), ("candidate", cand_paid)):
            if len(paid[k]) != len(call):
                raise ValueError(f"call {k}: {arm} scored {len(paid[k])} answers of {len(call)}")
            pays[arm] += [r is not None and (r - lo) / (hi - lo) >= HIGH_REWARD
                          for r, kept in zip(paid[k], keep) if kept]
        groups += [view["group_id"] for (view, _), kept in zip(call, keep) if kept]
        right += [verified >= HIGH_REWARD for (_, verified), kept in zip(call, keep) if kept]
    index = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    g, v = np.array([index[x] for x in groups], int), np.array(right, bool)
    n = len(index)

    def per_group(x: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=x.astype(float), minlength=n)

    parts = {arm: {"audit_miss_rate": (per_group(v & ~np.array(p, bool)), per_group(v)),
                   "audit_hack_rate": (per_group(~v & np.array(p, bool)), per_group(~v))}
             for arm, p in pays.items()}
    draws, ones = group_draws(n, BOOTSTRAP_SAMPLES, np.random.default_rng(seed)), np.ones((1, n))
    out = {}
    for name in AUDIT_FIELDS:
        m, c = (float(ratio_draws(ones, *parts[arm][name])[0]) for arm in ("main", "candidate"))
        deltas = ratio_draws(draws, *parts["candidate"][name]) - ratio_draws(draws, *parts["main"][name])
        low, high = bootstrap_ci(deltas, CONFIDENCE) if n >= MIN_GROUPS else (float("nan"), float("nan"))
        out[name] = MetricResult(name, m, c, c - m, low, high, int(np.isnan(deltas).sum()))
    return out


def newly_wrong(calls: list[list[tuple[dict, float]]], main_paid: list[list[float | None]],
                cand_paid: list[list[float | None]], reward_range: tuple[float, float],
                format_credit: float = 0.0) -> dict:
    """Answers the candidate judges worse than main: verified-wrong ones it pays more than main does and more
    than its declared ``format_credit`` (``paid``; pay on the [0, 1] scale above the range's
    ``pay_floor``, margin zero as the gate's ``failure_pay_new``: these are identical answers), with the most
    it pays one (``most``); verified-right ones main pays and it does not (``unpaid``)."""
    lo, hi = reward_range
    floor = pay_floor(reward_range)

    def pays(r: float | None) -> bool:
        return r is not None and (r - lo) / (hi - lo) >= HIGH_REWARD

    def pay(r: float | None) -> float:  # an error pays nothing
        return 0.0 if r is None else max((r - lo) / (hi - lo) - floor, 0.0)

    out = {"paid": 0, "unpaid": 0, "most": 0.0, "credit": format_credit}
    for call, main, cand in zip(calls, main_paid, cand_paid, strict=True):
        for (_, verified), m, c in zip(call, main, cand, strict=True):
            if verified >= HIGH_REWARD and pays(m) and not pays(c):
                out["unpaid"] += 1
            elif verified < HIGH_REWARD and pay(c) > max(pay(m), format_credit) + PAY_TOLERANCE:
                out["paid"] += 1
                out["most"] = max(out["most"], pay(c))
    return out


def declared_credit(repo: HarnessRepo, commit: str) -> float:
    """What ``commit``'s ``harness.yaml`` declares it may pay a verified failure (0 when it declares nothing or
    does not parse: the gate rejects an invalid one on its own)."""
    try:
        return float(repo.config(commit).format_credit)
    except (HarnessError, ValueError):
        return 0.0


def audit_contrast(repo: HarnessRepo, main_commit: str, cand_commit: str, rows: list[dict], domain_name: str,
                   verify: Verify, sandbox: Sandbox, settings: BacktestSettings, reward_range: tuple[float, float],
                   ) -> tuple[dict[str, MetricResult], dict, int] | None:
    """Both commits' rewards on one draw of constructed answers over ``rows``: the paired rates (gains: answers
    said as the policy says its own), the counts of :func:`newly_wrong` with, under ``harm``, the rates' deltas
    over every answer, and the number of answers.  None outside math or with nothing to audit.

    The draw comes from ``secrets`` (a harness cannot know which forms which id gets); the two arms run
    side by side, each call in a fresh session.  Raises :class:`AuditFailed` naming the arm that failed.
    """
    if domain_name not in AUDITED_DOMAINS:
        return None
    # wrong answers in the shapes the candidate's code names, those main's does not name first (reward_reading)
    calls = audit_calls(rows, verify, random.Random(secrets.randbits(64)), read_commit(repo, cand_commit),
                        read_commit(repo, main_commit))
    if not calls:
        return None
    with ThreadPoolExecutor(2) as pool:
        futures = {arm: pool.submit(score_calls, repo, commit, calls, sandbox, settings, reward_range)
                   for arm, commit in (("main", main_commit), ("candidate", cand_commit))}
        paid = {arm: f.result() for arm, f in futures.items()}
    for arm in ("main", "candidate"):
        if isinstance(paid[arm], str):
            raise AuditFailed(arm, paid[arm])  # type: ignore[arg-type]
    main, cand = paid["main"], paid["candidate"]
    worse = newly_wrong(calls, main, cand, reward_range, declared_credit(repo, cand_commit))  # type: ignore[arg-type]
    # harm on every answer (the audit's own shapes included), gains on those said as the policy says its own
    worse["harm"] = {name: r.delta for name, r in paired_rates(calls, main, cand, reward_range,  # type: ignore
                                                               as_policy_only=False).items()}
    return (paired_rates(calls, main, cand, reward_range, seed=settings.seed),  # type: ignore[arg-type]
            worse, sum(len(c) for c in calls))


def describe(r: MetricResult) -> str:
    """``audit_miss_rate 0.600 -> 0.000, -0.600 [-0.700, -0.500]``."""
    def num(x: float) -> str:
        return "-" if np.isnan(x) else f"{x:.3f}"

    def signed(x: float) -> str:
        return "-" if np.isnan(x) else f"{x:+.3f}"

    return f"{r.name} {num(r.main)} -> {num(r.candidate)}, {signed(r.delta)} [{signed(r.ci_low)}, {signed(r.ci_high)}]"


def audit_gate_checks(contrast: tuple[dict[str, MetricResult], dict, int] | None) -> list[dict]:
    """The gate's ``reward_audit`` check from :func:`audit_contrast` (none without an audit).

    Margin zero: the arms scored the same answers, so one verified-wrong answer the candidate pays more than
    main, beyond its declared format credit (any amount: 0.3 under the paid line counts), is a paid failure,
    not noise.  A rise in verified answers left unpaid is harm too, unless
    the candidate stops paying at least as large a share of wrong ones (a stricter reward putting back
    exact answers over a lenient one trades a few forms for many paid failures; the sample's
    ``reward_auc`` and ``signal_share`` still judge what it costs training).
    """
    if contrast is None:
        return []
    rates, worse, n = contrast
    figures = "; ".join(describe(r) for r in rates.values())
    problems = []
    if worse["paid"]:
        problems.append(f"pays {worse['paid']} verified-wrong constructed answers main left unpaid or paid less "
                        f"(up to {worse.get('most', 0.0):.3f} on the [0, 1] scale), above the declared format credit "
                        f"{worse.get('credit', 0.0):g}")
    miss, hack = worse["harm"]["audit_miss_rate"], worse["harm"]["audit_hack_rate"]  # over every answer
    if not np.isnan(miss) and miss > 0 and not (hack < 0 and miss + hack <= 0):
        problems.append(f"leaves more verified answers unpaid than main ({worse['unpaid']} main paid), "
                        "not offset by fewer paid wrong ones")
    detail = f"{'; '.join(problems) or 'no rise'} on {n} constructed answers ({figures})"
    return [{"name": "reward_audit", "passed": not problems, "detail": detail}]


def gate_audit(repo: HarnessRepo, main_commit: str, cand_commit: str, rows: list[dict], domain_name: str,
               verify: Verify, sandbox: Sandbox, settings: BacktestSettings,
               reward_range: tuple[float, float]) -> tuple[list[dict], dict[str, MetricResult]]:
    """The gate's audit of a candidate: its checks and the paired metrics its predictions are judged on.

    A candidate whose reward fails the audit session fails the check; when main's fails, nothing is
    measured (no metrics: audit predictions stay for the live check) and the check says so.
    """
    try:
        contrast = audit_contrast(repo, main_commit, cand_commit, rows, domain_name, verify, sandbox, settings,
                                  reward_range)
    except AuditFailed as exc:
        if exc.arm == "candidate":
            return [{"name": "reward_audit", "passed": False, "detail": str(exc)}], {}
        return [{"name": "reward_audit", "passed": True, "detail": f"not measured: {exc}"}], {}
    return audit_gate_checks(contrast), ({} if contrast is None else contrast[0])

"""After the next round trains on a merged intervention, measure its live effect.

An intervention merged in round n-1 changed the harness that round n trained on.
Its predictions about digest fields (``truncation_rate decrease``,
``miss_rate decrease``…) and about the trusted safety figures of the live round
(``failure_pay``, ``hack_rate``, ``reward_auc``, from ``tripwire.safety_figures``) are
measured on the archive rows of rounds n-1 and n, each change with a 95% interval:

- a field the digest pools over trajectories or groups: over GRPO groups (``live_stats``);
- ``heldout_accuracy``: paired over the trusted exam's tasks (``heldout_stats``);
- ``failure_pay``, ``reward_auc``: the tripwire's bootstrap over groups (``digest["tripwire"]``);
- any other field (``kept_share``: counted per step, not per group): the documented rule,
  a move beyond ``LIVE_TOLERANCE`` of the two digest values.

A prediction ``held`` only when its interval excludes zero in the predicted direction,
``contradicted`` when it excludes zero the other way, else ``inconclusive``, which does not
confirm; ``unchanged`` holds when the interval lies within ``LIVE_TOLERANCE``.  Confirmed
interventions become skills; refuted ones are reverted on ``main`` and recorded as misses.
An intervention merged on probation (its benefit was measurable only live) is reverted
unless every measured prediction held.  Trusted code: the agent cannot influence any of it.

Before live checks the loop runs the tripwire (``revert_on_tripwire``): a significant
regression of a safety figure reverts every merge that round n trained on.
"""

from __future__ import annotations

import math
from typing import Callable

from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo, Intervention
from harness_repo.trailers import parse_trailers
from meta_agent.gate import parse_effect
from meta_agent.live_stats import PER_GROUP, field_change
from meta_agent.skills import record_miss, record_skill
from meta_agent.tripwire import Alarm

LIVE_TOLERANCE = 0.05
"""``unchanged`` holds within this; a field without an interval must move by more than this to count."""
TRIPWIRE_FIGURES = ("failure_pay", "reward_auc")
"""Fields whose interval over groups the tripwire already computed (``digest["tripwire"]``)."""


def _verdict(direction: str, low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "inconclusive"
    if direction == "unchanged":
        return "contradicted" if low > 0 or high < 0 else \
            "held" if -LIVE_TOLERANCE <= low and high <= LIVE_TOLERANCE else "inconclusive"
    up, down = low > 0, high < 0
    if direction == "decrease":
        up, down = down, up
    return "held" if up else "contradicted" if down else "inconclusive"


def measure_prediction(text: str, before: dict, after: dict, before_rows: list[dict],
                       after_rows: list[dict]) -> tuple[str, dict | None]:
    """The verdict on one ``Predicted-Effect`` line (held | contradicted | inconclusive | unmeasurable) and
    the measured change (before, after, delta, low, high, groups or tasks on each side, method), None when
    nothing was measured.  ``before``/``after``: the digests of rounds n-1 and n; ``*_rows``: their archive rows.
    """
    parsed = parse_effect(text)
    if parsed is None:
        return "unmeasurable", None
    metric, direction = parsed
    if metric in PER_GROUP or metric == "heldout_accuracy":
        change = field_change(metric, before_rows, after_rows)._asdict()
        if math.isnan(change["before"]) or math.isnan(change["after"]):
            return "unmeasurable", None
        verdict = _verdict(direction, change["low"], change["high"])
        # an undefined bound (fewer than 2 groups) is null in the digest's JSON, as the tripwire's are
        return verdict, {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in change.items()}
    alarm = next((a for a in after.get("tripwire") or [] if a.get("metric") == metric), None)
    if metric in TRIPWIRE_FIGURES and alarm and isinstance(alarm.get("delta"), (int, float)):
        low, high = (math.nan if alarm.get(k) is None else alarm[k] for k in ("ci_low", "ci_high"))
        change = {"before": alarm["before"], "after": alarm["after"], "delta": alarm["delta"],
                  "low": alarm.get("ci_low"), "high": alarm.get("ci_high"), "method": "bootstrap over groups (tripwire)"}
        return _verdict(direction, low, high), change
    a, b = before.get(metric), after.get(metric)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return "unmeasurable", None
    delta = float(b) - float(a)
    change = {"before": a, "after": b, "delta": delta, "low": None, "high": None,
              "method": f"no interval: a move beyond {LIVE_TOLERANCE}"}
    if direction == "unchanged":
        return ("held" if abs(delta) <= LIVE_TOLERANCE else "contradicted"), change
    signed = delta if direction == "increase" else -delta
    return ("held" if signed > LIVE_TOLERANCE else "contradicted" if signed < -LIVE_TOLERANCE
            else "inconclusive"), change


def judge_prediction(text: str, before: dict, after: dict, before_rows: list[dict], after_rows: list[dict]) -> str:
    """The verdict of :func:`measure_prediction` alone."""
    return measure_prediction(text, before, after, before_rows, after_rows)[0]


def describe_change(text: str, verdict: str, change: dict | None) -> str:
    """``truncation_rate decrease: held, -0.438 [-0.591, -0.284] (normal over groups, 8 -> 8)``."""
    if change is None:
        return f"{text.split(':')[0]}: {verdict}"
    interval = "" if change.get("low") is None or change.get("high") is None \
        else f" [{change['low']:+.3f}, {change['high']:+.3f}]"
    sizes = f", {change['n_before']} -> {change['n_after']}" if "n_before" in change else ""
    return f"{text.split(':')[0]}: {verdict}, {change['delta']:+.3f}{interval} ({change['method']}{sizes})"


def _undone_by(repo: HarnessRepo, iv: Intervention, trailer: str) -> bool:
    """Whether ``iv`` was reverted by a commit carrying ``trailer``: this check's own revert, made before a kill."""
    return iv.status == "reverted" and bool(iv.revert_commit) and trailer in parse_trailers(
        repo.message(iv.revert_commit))


def check_live_effects(repo: HarnessRepo, round: int, digest: dict, previous: list[dict], before_rows: list[dict],
                       after_rows: list[dict], message: Callable[[str], None] = lambda s: None) -> list[dict]:
    """Judge every intervention merged in ``round - 1``; promote to skill or revert.

    ``before_rows``/``after_rows``: the archive rows (all splits) of rounds ``round - 1`` and ``round``.
    Each record carries ``predictions`` (text -> verdict) and ``intervals`` (text -> the measured change).
    Idempotent across a resumed digest phase: a merge this check already reverted is reported
    refuted again without a second revert, and skills and misses count an intervention once.
    """
    before = next((d for d in previous if d.get("round") == round - 1), None)
    if before is None:
        return []
    out = []
    for iv in repo.interventions():
        if iv.round != round - 1:
            continue
        measured_all = {text: measure_prediction(text, before, digest, before_rows, after_rows)
                        for text in iv.predicted_effects}
        verdicts = {text: verdict for text, (verdict, _) in measured_all.items()}
        intervals = {text: change for text, (_, change) in measured_all.items() if change is not None}
        if _undone_by(repo, iv, "Live-Check"):
            record_miss(iv)
            message(f"live check {iv.branch}: refuted (reverted before the stop; not reverted again)")
            out.append({"branch": iv.branch, "outcome": "refuted", "predictions": verdicts, "intervals": intervals})
            continue
        if iv.status != "merged":
            continue
        measured = {k: v for k, v in verdicts.items() if v in ("held", "contradicted")}
        probation = "probation" in (iv.verdict or "")
        unconfirmed = probation and not (measured and all(v == "held" for v in measured.values()))
        if any(v == "contradicted" for v in measured.values()) or unconfirmed:
            outcome = "refuted"
            why = ("it was merged on probation and its benefit was not confirmed" if unconfirmed
                   and not any(v == "contradicted" for v in measured.values()) else "its predicted effect did not hold")
            repo.revert_merge(iv.merge_commit, f"Revert {iv.branch}: {why} in round {round}",
                              {"Live-Check": "; ".join(f"{k} -> {v}" for k, v in verdicts.items())})
            failpoint("live_check.reverted")
            record_miss(iv)
        elif measured and all(v == "held" for v in measured.values()):
            outcome = "confirmed"
            record_skill(repo, iv, round, verdicts, before, digest)
        else:
            outcome = "inconclusive"
        shown = "; ".join(describe_change(k, v, intervals.get(k)) for k, v in verdicts.items())
        message(f"live check {iv.branch}: {outcome} ({shown})")
        out.append({"branch": iv.branch, "outcome": outcome, "predictions": verdicts, "intervals": intervals})
    return out


def revert_on_tripwire(repo: HarnessRepo, round: int, alarms: list[Alarm],
                       message: Callable[[str], None] = lambda s: None) -> list[str]:
    """Revert every intervention merged in ``round - 1`` when a safety alarm fired; the branches reverted.

    Idempotent: a merge already reverted by the tripwire (an earlier attempt at this phase, killed)
    is listed again but not reverted again, and its miss is counted once.
    """
    fired = [a for a in alarms if a.fired]
    if not fired:
        return []
    why = "; ".join(a.detail for a in fired)
    reverted = []
    for iv in repo.interventions():
        if iv.round != round - 1 or not iv.merge_commit:
            continue
        if _undone_by(repo, iv, "Tripwire"):
            record_miss(iv)
            reverted.append(iv.branch)
            continue
        if iv.status != "merged":
            continue
        repo.revert_merge(iv.merge_commit, f"Revert {iv.branch}: the live tripwire fired in round {round}: {why}",
                          {"Tripwire": [f"{a.metric} {a.before:.3f} -> {a.after:.3f} "
                                        f"(CI [{a.ci_low:+.3f}, {a.ci_high:+.3f}])" for a in fired]})
        failpoint("tripwire.reverted")
        record_miss(iv)
        reverted.append(iv.branch)
    message(f"tripwire fired in round {round} ({why}); reverted: {', '.join(reverted) or 'nothing merged last round'}")
    return reverted


def backtest_precision(interventions: list[Intervention], digests: list[dict]) -> dict:
    """How often the gate's merges kept their promise, from a run's interventions and round digests.

    ``precision``: share of merges a later round's live check confirmed; a merge never checked (merged
    in the last round, or its predictions unmeasurable live) counts as unconfirmed.  ``retried``: share of
    rejected branches whose very change (``Recipe-Change`` trailer, else the same subject) a later round
    proposed again.  ``reverts``: merges undone on ``main`` (live check, tripwire or restore).  Shares are
    None when there is nothing to divide by.

        backtest_precision(repo.interventions(), [json.load(open(p)) for p in digest_paths])
        # {"merges": 2, "confirmed": 1, "precision": 0.5, "rejected": 1, "retried": 0, "retried_share": 0.0, ...}
    """
    confirmed = {c.get("branch") for d in digests for c in d.get("live_checks") or [] if c.get("outcome") == "confirmed"}
    merges = [iv for iv in interventions if iv.merge_commit]
    rejected = [iv for iv in interventions if iv.status == "rejected"]

    def change(iv: Intervention) -> str:
        return (iv.trailers.get("Recipe-Change") or [iv.subject])[-1]

    retried = [iv for iv in rejected
               if any(change(other) == change(iv) and other.round > iv.round for other in interventions)]
    held = sum(1 for iv in merges if iv.branch in confirmed)
    return {"merges": len(merges), "confirmed": held, "precision": held / len(merges) if merges else None,
            "rejected": len(rejected), "retried": len(retried),
            "retried_share": len(retried) / len(rejected) if rejected else None,
            "reverts": sum(1 for iv in merges if iv.revert_commit)}


def live_lines(digests: list[dict]) -> dict[str, list[str]]:
    """Per branch, one line per live check of the run's round ``digests``: outcome, then each prediction
    with its measured change and interval (``describe_change``); for ``history`` and ``report``."""
    out: dict[str, list[str]] = {}
    for d in sorted(digests, key=lambda d: d.get("round", 0)):
        for check in d.get("live_checks") or []:
            intervals = check.get("intervals") or {}
            shown = "; ".join(describe_change(text, verdict, intervals.get(text))
                              for text, verdict in (check.get("predictions") or {}).items())
            out.setdefault(check["branch"], []).append(f"live round {d.get('round')}: {check['outcome']}"
                                                       + (f" ({shown})" if shown else ""))
    return out


def describe_precision(figures: dict) -> str:
    """One line for ``history`` and ``report``: the figures of :func:`backtest_precision` in words."""
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (f"backtest precision {share(figures['precision'])} ({figures['confirmed']} of {figures['merges']} merges "
            f"confirmed live; unchecked ones count as unconfirmed) · rejected changes tried again "
            f"{share(figures['retried_share'])} ({figures['retried']} of {figures['rejected']}) · "
            f"reverts {figures['reverts']}")

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

Each prediction is one of three kinds.  A *benefit* names a field in the direction that is good
for training (``BENEFITS``: ``truncation_rate decrease``, ``heldout_accuracy increase``...); a
*side effect* names a field in any other direction (``kept_share decrease``); a *guard* says
``unchanged``.  The policy trains every round, so a field moves whether or not a merge did
anything: a benefit is measured against a control, the change ordinary training made the round
before (``live_stats.controlled_change``: rounds n-2, n-1 and n, a difference in differences with
its interval), or against a concurrent control arm where the run names one (round n of a run that
trained from the same policy without the merge, ``meta_agent.judge.live_control``: how a benchmark
confirms a round-0 merge in round 1), or, after a rollback, against round n-1, which trained from the same
policy as round n without the merge (``meta_agent.run.lineage``).  It is ``unmeasurable`` without such a
control (round 1 has no round -1; a field without an interval over groups or tasks), and ``shared`` when
another merge that round n trained
on predicts the same benefit: one round's change cannot be credited to each of several merges.
Side effects and guards are measured as the raw change from round n-1 to round n.  A prediction on a
reward-audit field (``audit_miss_rate``, ``audit_hack_rate``) carries its own control: the merge's parent
and the merge commit audited on the same constructed answers to round n's responses
(``judge.audit_live``), measurable in round 1 too.

A prediction ``held`` only when its interval excludes zero in the predicted direction,
``contradicted`` when it excludes zero the other way, else ``inconclusive``; ``unchanged`` holds
when the interval lies within ``LIVE_TOLERANCE``.  A merge is ``confirmed`` (and becomes a skill)
only when it predicted at least one benefit and every prediction held on its own: a side effect that
held confirms nothing, and an inconclusive, shared or unmeasurable one leaves the merge
``unconfirmed``.  A contradicted prediction reverts the merge (``refuted``, a miss), and so does an
unconfirmed merge on probation (its benefit was measurable only live, so nothing else vouches for
it), unless the rounds it was measured on lost archive rows: that is the archive's loss, and the merge stays,
unconfirmed, with the missing rows said.  Trusted code: the agent cannot influence any of it.

Before live checks the loop runs the tripwire (``tripwire_revert.revert_on_tripwire``): a significant
regression of a safety figure reverts every merge that round n trained on.  The merges of round n-1 are reverted
on the alarm alone; a merge of an earlier round when the alarm is on pay for verified failures and the merge pays
round n's paid failures, as the policy wrote them, more than its parent (``audit_live.paid_anew``, margin zero): a
reward paying a shape the policy first writes rounds after the merge paid nothing until then.
"""

from __future__ import annotations

import math
from typing import Callable

from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo, Intervention
from harness_repo.trailers import parse_trailers
from meta_agent.gate import parse_effect
from meta_agent.judge.audit_live import is_audit_prediction, measure_audit
from meta_agent.judge.metrics import MetricResult
from meta_agent.live_stats import PER_GROUP, controlled_change, field_change
from meta_agent.review.losses import missing_rows_note
from meta_agent.skills import record_miss, record_skill

LIVE_TOLERANCE = 0.05
"""``unchanged`` holds within this; a field without an interval must move by more than this to count."""
TRIPWIRE_FIGURES = ("failure_pay", "reward_auc")
"""Fields whose interval over groups the tripwire already computed (``digest["tripwire"]``)."""
BENEFITS = {
    "heldout_accuracy": "increase", "verified_mean": "increase", "reward_auc": "increase",
    "signal_share": "increase", "kept_share": "increase",
    "truncation_rate": "decrease", "no_final_answer_rate": "decrease", "miss_rate": "decrease",
    "hack_rate": "decrease", "failure_pay": "decrease", "zero_variance_share": "decrease",
    "verified_zero_variance_share": "decrease", "format_error_rate": "decrease", "patch_failed_rate": "decrease",
    "test_edit_rate": "decrease", "error_rate": "decrease",
    "audit_miss_rate": "decrease", "audit_hack_rate": "decrease",
}
"""The direction in which a field is good for training: a prediction in it is a benefit, any other a side effect."""


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
        if not (math.isnan(change["before"]) or math.isnan(change["after"])):
            verdict = _verdict(direction, change["low"], change["high"])
            # an undefined bound (fewer than 2 groups) is null in the digest's JSON, as the tripwire's are
            return verdict, {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in change.items()}
        # the rows do not hold it (kept_share of a backend that does not record kept): the digest's figures
    alarm = next((a for a in after.get("tripwire") or [] if a.get("metric") == metric), None)
    if metric in TRIPWIRE_FIGURES and alarm and isinstance(alarm.get("delta"), (int, float)):
        low, high = (math.nan if alarm.get(k) is None else alarm[k] for k in ("ci_low", "ci_high"))
        change = {"before": alarm["before"], "after": alarm["after"], "delta": alarm["delta"],
                  "low": alarm.get("ci_low"), "high": alarm.get("ci_high"),
                  "method": "bootstrap over groups (tripwire)"}
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


def describe_change(text: str, verdict: str, change: dict | None) -> str:
    """``truncation_rate decrease: held, -0.438 [-0.591, -0.284] (normal over groups, 8 -> 8)``."""
    if change is None:
        return f"{text.split(':')[0]}: {verdict}"
    if "shared_with" in change:
        return f"{text.split(':')[0]}: {verdict} with {', '.join(change['shared_with'])}"
    interval = "" if change.get("low") is None or change.get("high") is None \
        else f" [{change['low']:+.3f}, {change['high']:+.3f}]"
    sizes = f", {change['n_before']} -> {change['n_after']}" if "n_before" in change else ""
    return f"{text.split(':')[0]}: {verdict}, {change['delta']:+.3f}{interval} ({change['method']}{sizes})"


def undone_by(repo: HarnessRepo, iv: Intervention, trailer: str) -> bool:
    """Whether ``iv`` was reverted by a commit carrying ``trailer``: this check's own revert, made before a kill."""
    return iv.status == "reverted" and bool(iv.revert_commit) and trailer in parse_trailers(
        repo.message(iv.revert_commit))


def prediction_kind(text: str) -> str:
    """``benefit``, ``side effect`` or ``guard`` (``unchanged``) of one ``Predicted-Effect`` line; ``unparsed``."""
    parsed = parse_effect(text)
    if parsed is None:
        return "unparsed"
    metric, direction = parsed
    return "guard" if direction == "unchanged" else "benefit" if BENEFITS.get(metric) == direction else "side effect"


def claimed_benefits(predicted_effects: list[str]) -> set[str]:
    """The fields whose benefit these predictions claim against a control: what no other merge of the same round
    may also claim, or the benefit is ``shared`` and credited to neither (an agent that proposes two such
    changes in one round should hold one back)."""
    return {parse_effect(text)[0] for text in predicted_effects  # type: ignore[index]
            if prediction_kind(text) == "benefit" and not is_audit_prediction(text)}


def measure_benefit(text: str, control_rows: list[dict], before_rows: list[dict], after_rows: list[dict],
                    shared_with: list[str], control: str = "previous") -> tuple[str, dict | None]:
    """The verdict on one predicted benefit against the control (see the module docstring) and its change.

    ``control``: ``previous`` (``control_rows`` are round n-2's: a difference in differences),
    ``concurrent`` (round n of a control arm that trained without the merge: the plain difference) or
    ``rollback`` (round n-1, which trained from the same policy as round n: the plain difference), as
    ``meta_agent.judge.live_control`` chooses.
    """
    metric, direction = parse_effect(text) or ("", "")
    if shared_with:
        return "shared", {"shared_with": sorted(shared_with)}
    if not control_rows or not (metric in PER_GROUP or metric == "heldout_accuracy"):
        return "unmeasurable", None
    if control in ("concurrent", "rollback"):
        change = field_change(metric, control_rows, after_rows)._asdict()
        change["method"] += (", against a control arm's same round" if control == "concurrent" else
                             ", against the round before, which trained from the same policy (rollback)")
    else:
        change = controlled_change(metric, control_rows, before_rows, after_rows)._asdict()
    if math.isnan(change["delta"]):
        return "unmeasurable", None
    verdict = _verdict(direction, change["low"], change["high"])
    return verdict, {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in change.items()}


def check_live_effects(repo: HarnessRepo, round: int, digest: dict, previous: list[dict], before_rows: list[dict],
                       after_rows: list[dict], message: Callable[[str], None] = lambda s: None, *,
                       control_rows: list[dict] | None = None, control: str = "previous",
                       audit: Callable[[Intervention], dict[str, MetricResult] | str | None] | None = None,
                       ) -> list[dict]:
    """Judge every intervention merged in ``round - 1``; promote to skill or revert (module docstring).

    ``before_rows``/``after_rows``: the archive rows (all splits) of rounds ``round - 1`` and ``round``;
    ``control_rows``: the control for benefits, usually round ``round - 2``'s (None or empty: no benefit is
    measurable, so nothing is confirmed and every probation merge is reverted); ``control``: what they are,
    ``previous``, ``rollback`` or ``concurrent`` (``judge.live_control``).  Each record carries
    ``predictions`` (text -> verdict), ``kinds`` (text -> benefit | side effect | guard) and
    ``intervals`` (text -> the measured change).  ``audit``: per merge, its reward audit against its own
    parent on round n's answers (``judge.audit_live.live_contrast``), the control for predictions on an
    audit field; called only for a merge that makes one (None: those are unmeasurable).  Idempotent across a
    resumed digest phase: a merge this
    check already reverted is reported refuted again without a second revert, and skills and misses
    count an intervention once.
    """
    before = next((d for d in previous if d.get("round") == round - 1), None)
    if before is None:
        return []
    trained = [iv for iv in repo.interventions() if iv.round == round - 1 and iv.merge_commit]
    claims: dict[str, list[str]] = {}  # benefit field -> the merges round n trained on that predict it
    for iv in trained:
        for metric in claimed_benefits(iv.predicted_effects):
            claims.setdefault(metric, []).append(iv.branch)
    # rows a lost or damaged archive part took from the rounds measured here (the digest's ``archive_losses``):
    # each verdict says so rather than judging on fewer rows unsaid
    measured_rounds = {round - 1, round} | ({round - 2} if control == "previous" and control_rows else set())
    missing = missing_rows_note(digest.get("archive_losses") or [], measured_rounds)
    out = []
    for iv in trained:
        measured_all, kinds = {}, {}
        contrast = audit(iv) if audit is not None and iv.status == "merged" and any(
            is_audit_prediction(t) for t in iv.predicted_effects) else None
        for text in iv.predicted_effects:
            kinds[text] = prediction_kind(text)
            if is_audit_prediction(text):  # its own control: the merge's parent on the same answers
                measured_all[text] = measure_audit(text, contrast, _verdict)
            elif kinds[text] == "benefit":
                others = [b for b in claims[parse_effect(text)[0]] if b != iv.branch]  # type: ignore[index]
                measured_all[text] = measure_benefit(text, control_rows or [], before_rows, after_rows, others,
                                                     control)
            else:
                measured_all[text] = measure_prediction(text, before, digest, before_rows, after_rows)
        verdicts = {text: verdict for text, (verdict, _) in measured_all.items()}
        intervals = {text: change for text, (_, change) in measured_all.items() if change is not None}
        record = {"branch": iv.branch, "predictions": verdicts, "kinds": kinds, "intervals": intervals}
        if missing:
            record["rows_missing"] = missing
        if undone_by(repo, iv, "Live-Check"):
            record_miss(iv)
            message(f"live check {iv.branch}: refuted (reverted before the stop; not reverted again)")
            out.append({**record, "outcome": "refuted"})
            continue
        if iv.status != "merged":
            continue
        contradicted = any(v == "contradicted" for v in verdicts.values())
        confirmed = not contradicted and "benefit" in kinds.values() and all(v == "held" for v in verdicts.values())
        # an unconfirmed benefit measured without rows the archive lost is the archive's loss: the merge stays
        probation = iv.on_probation and not (missing and not contradicted)
        if contradicted or (probation and not confirmed):
            outcome = "refuted"
            why = ("its predicted effect did not hold" if contradicted else
                   "it was merged on probation and its benefit was not confirmed against a control")
            repo.revert_merge_cascade(iv.merge_commit, f"Revert {iv.branch}: {why} in round {round}",
                                      {"Live-Check": "; ".join(f"{k} -> {v}" for k, v in verdicts.items())})
            failpoint("live_check.reverted")
            record_miss(iv)
        elif confirmed:
            outcome = "confirmed"
            record_skill(repo, iv, round, verdicts, before, digest)
        else:
            outcome = "unconfirmed"
        shown = "; ".join(describe_change(k, v, intervals.get(k)) for k, v in verdicts.items())
        kept = " (kept on probation: the archive lost rows it was measured on, not the harness)" \
            if missing and outcome == "unconfirmed" and iv.on_probation else ""
        message(f"live check {iv.branch}: {outcome}{kept} ({shown})" + (f"; {missing}" if missing else ""))
        out.append({**record, "outcome": outcome})
    return out


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
    confirmed = {c.get("branch") for d in digests for c in d.get("live_checks") or []
                 if c.get("outcome") == "confirmed"}
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
                                                       + (f" ({shown})" if shown else "")
                                                       + (f"; {check['rows_missing']}" if check.get("rows_missing")
                                                          else ""))
    return out


def describe_precision(figures: dict) -> str:
    """One line for ``history`` and ``report``: the figures of :func:`backtest_precision` in words."""
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (f"backtest precision {share(figures['precision'])} ({figures['confirmed']} of {figures['merges']} merges "
            f"confirmed live; unchecked ones count as unconfirmed) · rejected changes tried again "
            f"{share(figures['retried_share'])} ({figures['retried']} of {figures['rejected']}) · "
            f"reverts {figures['reverts']}")

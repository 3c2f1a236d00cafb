"""After the next round trains on a merged intervention, measure its live effect.

An intervention merged in round n-1 changed the harness that round n trained on.
Its predictions about digest fields (``truncation_rate decrease``,
``miss_rate decrease``…) and about the trusted safety figures of the live round
(``failure_pay``, ``hack_rate``, ``reward_auc``, from ``tripwire.safety_figures``) are
compared between rounds n-1 and n.  Confirmed interventions become skills; refuted
ones are reverted on ``main`` and recorded as misses.  An intervention merged on
probation (its benefit was measurable only live) is reverted unless every measured
prediction held.  Trusted code: the agent cannot influence any of it.

Before live checks the loop runs the tripwire (``revert_on_tripwire``): a significant
regression of a safety figure reverts every merge that round n trained on.
"""

from __future__ import annotations

from typing import Callable

from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo, Intervention
from harness_repo.trailers import parse_trailers
from meta_agent.gate import parse_effect
from meta_agent.skills import record_miss, record_skill
from meta_agent.tripwire import Alarm

LIVE_TOLERANCE = 0.05
"""A digest field must move by more than this to count as a change."""


def judge_prediction(text: str, before: dict, after: dict) -> str:
    """held | contradicted | inconclusive | unmeasurable, for one ``Predicted-Effect`` line."""
    parsed = parse_effect(text)
    if parsed is None:
        return "unmeasurable"
    metric, direction = parsed
    a, b = before.get(metric), after.get(metric)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return "unmeasurable"
    delta = float(b) - float(a)
    if direction == "increase":
        return "held" if delta > LIVE_TOLERANCE else "contradicted" if delta < -LIVE_TOLERANCE else "inconclusive"
    if direction == "decrease":
        return "held" if delta < -LIVE_TOLERANCE else "contradicted" if delta > LIVE_TOLERANCE else "inconclusive"
    return "held" if abs(delta) <= LIVE_TOLERANCE else "contradicted"


def _undone_by(repo: HarnessRepo, iv: Intervention, trailer: str) -> bool:
    """Whether ``iv`` was reverted by a commit carrying ``trailer``: this check's own revert, made before a kill."""
    return iv.status == "reverted" and bool(iv.revert_commit) and trailer in parse_trailers(
        repo.message(iv.revert_commit))


def check_live_effects(repo: HarnessRepo, round: int, digest: dict, previous: list[dict],
                       message: Callable[[str], None] = lambda s: None) -> list[dict]:
    """Judge every intervention merged in ``round - 1``; promote to skill or revert.

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
        verdicts = {text: judge_prediction(text, before, digest) for text in iv.predicted_effects}
        if _undone_by(repo, iv, "Live-Check"):
            record_miss(iv)
            message(f"live check {iv.branch}: refuted (reverted before the stop; not reverted again)")
            out.append({"branch": iv.branch, "outcome": "refuted", "predictions": verdicts})
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
        message(f"live check {iv.branch}: {outcome} ({'; '.join(f'{k}: {v}' for k, v in verdicts.items())})")
        out.append({"branch": iv.branch, "outcome": outcome, "predictions": verdicts})
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


def describe_precision(figures: dict) -> str:
    """One line for ``history`` and ``report``: the figures of :func:`backtest_precision` in words."""
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return (f"backtest precision {share(figures['precision'])} ({figures['confirmed']} of {figures['merges']} merges "
            f"confirmed live; unchecked ones count as unconfirmed) · rejected changes tried again "
            f"{share(figures['retried_share'])} ({figures['retried']} of {figures['rejected']}) · "
            f"reverts {figures['reverts']}")

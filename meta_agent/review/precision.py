"""The backtest's precision as ``history`` and ``report`` state it: merges confirmed live, over the merges a later
round could check. A merge no round has trained on yet is waiting, and one whose every predicted benefit has no
control live (``unmeasurable``) or is claimed by another merge too (``shared``) cannot be confirmed by anything the
run measures: both are listed with their reason, never counted as failures.

    figures = checked_precision(repo.interventions(), digests)
    describe(figures)   # "backtest precision 0.50: 1 of 2 merges a later round could check was confirmed ..."
"""

from __future__ import annotations

from harness_repo.repo import Intervention
from meta_agent.live_check import backtest_precision

NO_CONTROL = ("unmeasurable", "shared")


def _why_unmeasurable(check: dict) -> str | None:
    """The reason a checked merge's benefit could not be measured, or None when something was measured."""
    predictions = check.get("predictions") or {}
    kinds = check.get("kinds") or {}
    benefits = {t: v for t, v in predictions.items() if kinds.get(t, "benefit") == "benefit"}
    if any(v == "contradicted" for v in predictions.values()) or not benefits:
        return None
    if all(v in NO_CONTROL for v in benefits.values()):
        return "; ".join(f"{t}: {'no control for it live' if v == 'unmeasurable' else 'predicted by another merge too'}"
                         for t, v in benefits.items())
    return None


def checked_precision(interventions: list[Intervention], digests: list[dict]) -> dict:
    """Counts for :func:`describe`: confirmed, checked, waiting and unmeasurable merges (with reasons), plus
    :func:`~meta_agent.live_check.backtest_precision`'s retried and reverts."""
    checks: dict[str, dict] = {}
    for d in sorted(digests, key=lambda d: d.get("round", -1)):
        for c in d.get("live_checks") or []:
            if isinstance(c, dict) and c.get("branch"):
                checks[c["branch"]] = c  # the last check of a branch decides
    last = max((d.get("round", -1) for d in digests), default=-1)
    confirmed, checked, waiting, unmeasurable = [], [], [], []
    for iv in (iv for iv in interventions if iv.merge_commit):
        check = checks.get(iv.branch)
        if check is None:
            waiting.append(f"{iv.branch} (merged in round {iv.round}; "
                           + ("the next round has not trained on it yet)" if iv.round >= last else
                              "no live check recorded)"))
        elif check.get("outcome") == "confirmed":
            confirmed.append(iv.branch)
            checked.append(iv.branch)
        elif why := _why_unmeasurable(check):
            unmeasurable.append(f"{iv.branch} ({why})")
        else:
            checked.append(iv.branch)
    base = backtest_precision(interventions, digests)
    return {"confirmed": len(confirmed), "checked": len(checked),
            "precision": len(confirmed) / len(checked) if checked else None,
            "waiting": waiting, "unmeasurable": unmeasurable, "merges": base["merges"],
            "rejected": base["rejected"], "retried": base["retried"], "reverts": base["reverts"]}


def describe(f: dict) -> str:
    """One paragraph: the precision over checked merges, then what it leaves out and why."""
    if f["precision"] is None:
        head = "backtest precision undefined: no merge a later round could check"
    else:
        head = (f"backtest precision {f['precision']:.2f}: {f['confirmed']} of {f['checked']} merges a later round "
                "could check confirmed live")
    left = []
    if f["waiting"]:
        left.append(f"{len(f['waiting'])} waiting: " + ", ".join(f["waiting"]))
    if f["unmeasurable"]:
        left.append(f"{len(f['unmeasurable'])} unmeasurable live: " + ", ".join(f["unmeasurable"]))
    retried = ("undefined (nothing rejected)" if not f["rejected"] else
               f"{f['retried'] / f['rejected']:.2f} ({f['retried']} of {f['rejected']})")
    return (head + (f" (not counted: {'; '.join(left)})" if left else "")
            + f" · rejected changes tried again {retried} · reverts {f['reverts']}")


def explain_change(text: str, verdict: str, change: dict | None, round_: object = None) -> str:
    """:func:`~meta_agent.live_check.describe_change` with the reason an ``unmeasurable`` or ``shared`` verdict
    leaves the merge unconfirmed, so a reader does not take it for a failure."""
    from meta_agent.live_check import describe_change

    line = describe_change(text, verdict, change)
    if verdict == "unmeasurable":
        line += (" (no control for it live: a benefit counts only against the change the round before made "
                 "without this merge" + ("; round 1 has no round -1 and no control arm" if round_ == 1 else "")
                 + ")")
    elif verdict == "shared":
        line += " (another merge of the round predicted the same benefit, so neither can claim it)"
    return line

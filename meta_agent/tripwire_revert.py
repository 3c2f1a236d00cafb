"""The tripwire's reverts: when a trusted safety figure of round n regressed, every merge of round n - 1 is
reverted, and (on an alarm about pay for failures) every earlier merge still on main that pays round n's paid
failures anew (``judge.audit_live.paid_anew``); each with a ``Tripwire`` trailer naming the alarms.

    revert_on_tripwire(repo, n, alarms, print, pays=lambda iv: paid_anew(repo, iv.merge_commit, rows, ...))
"""

from __future__ import annotations

from typing import Callable

from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo, Intervention
from meta_agent.judge.audit_live import NewPay
from meta_agent.live_check import undone_by
from meta_agent.skills import record_miss
from meta_agent.tripwire import Alarm


def _alarm_lines(fired: list[Alarm]) -> list[str]:
    """The ``Tripwire`` trailer's lines: each fired alarm's figure, before and after, with its interval."""
    return [f"{a.metric} {a.before:.3f} -> {a.after:.3f} (CI [{a.ci_low:+.3f}, {a.ci_high:+.3f}])" for a in fired]


def revert_on_tripwire(repo: HarnessRepo, round: int, alarms: list[Alarm],
                       message: Callable[[str], None] = lambda s: None, *,
                       pays: Callable[[Intervention], NewPay | str] | None = None) -> list[str]:
    """Revert every intervention merged in ``round - 1`` when a safety alarm fired; the branches reverted.

    ``pays``: per merge, the round's paid verified failures it pays more than its parent
    (``audit_live.paid_anew`` on round n's rows).  When an alarm on pay for failures fired, every merge of an
    earlier round still on main that ``pays`` blames is reverted too, after those of ``round - 1``.

    Idempotent: a merge already reverted by the tripwire (an earlier attempt at this phase, killed)
    is listed again but not reverted again, and its miss is counted once.
    """
    from meta_agent.tripwire import RISES, ROWS_MISSING

    for alarm in alarms:
        if alarm.fired and alarm.metric == ROWS_MISSING:  # the archive's loss: said aloud, blamed on no merge
            message(f"tripwire alarm in round {round}: {alarm.detail}")
    fired = [a for a in alarms if a.fired and a.metric != ROWS_MISSING]
    if not fired:
        return []
    why = "; ".join(a.detail for a in fired)
    reverted = []
    for branch in [iv.branch for iv in repo.interventions() if iv.round == round - 1 and iv.merge_commit]:
        iv = repo.intervention(branch)  # read now: a revert in an earlier one's way may have undone it
        if undone_by(repo, iv, "Tripwire"):
            record_miss(iv)
            reverted.append(iv.branch)
            continue
        if iv.status != "merged":
            continue
        # a later merge whose changes stand in the way is reverted first, with why (``revert_merge_cascade``)
        made = repo.revert_merge_cascade(
            iv.merge_commit, f"Revert {iv.branch}: the live tripwire fired in round {round}: {why}",
            {"Tripwire": _alarm_lines(fired)})
        failpoint("tripwire.reverted")
        record_miss(iv)
        reverted.append(iv.branch)
        for other, reason in made[:-1]:  # one of this round's is met again in this loop: a miss like the others
            message(f"tripwire: reverted {other} first: {reason}")
    if pays is not None and any(a.metric in RISES for a in fired):
        reverted += _revert_earlier_payers(repo, round, fired, why, pays, message)
    message(f"tripwire fired in round {round} ({why}); reverted: {', '.join(reverted) or 'nothing merged last round'}")
    return reverted


def _revert_earlier_payers(repo: HarnessRepo, round: int, fired: list[Alarm], why: str,
                           pays: Callable[[Intervention], NewPay | str], message: Callable[[str], None]) -> list[str]:
    """Merges of rounds before ``round - 1`` still on main that pay round ``round``'s paid failures anew."""
    reverted = []
    for branch in [iv.branch for iv in repo.interventions() if iv.round < round - 1 and iv.merge_commit]:
        iv = repo.intervention(branch)  # read now: an earlier revert of this loop may have undone it
        if iv.status != "merged":
            continue
        paid = pays(iv)
        if isinstance(paid, str):
            message(f"tripwire: cannot tell whether {iv.branch} pays round {round}'s failures ({paid}); kept")
            continue
        if paid.count == 0:
            continue
        blame = (f"{paid.count} verified failures training paid in round {round}, as the policy wrote them, are "
                 f"paid more by this merge than by its parent, up to {paid.most:.3f}, above its declared format "
                 f"credit {paid.credit:g} (margin 0)")
        made = repo.revert_merge_cascade(
            iv.merge_commit, f"Revert {iv.branch}: the live tripwire fired in round {round}: {why}; {blame}",
            {"Tripwire": _alarm_lines(fired), "Pays-Failures": blame})
        failpoint("tripwire.reverted")
        record_miss(iv)
        reverted.append(iv.branch)
        message(f"tripwire: reverted {iv.branch}, merged in round {iv.round}: {blame}")
        for other, reason in made[:-1]:
            message(f"tripwire: reverted {other} first: {reason}")
    return reverted

"""Which policy each round trained from, and the rollback after a round that lost what its policy knew.

A round normally trains from the policy the round before it produced.  When a round's exam falls below the
exam of the policy it trained from (``heldout_regression``: a paired interval wholly below zero), continuing
from the fallen policy would make every later round pay for it, and no harness edit could undo the damage.  So
the next round starts again from the policy the fallen round started from, under whatever harness the fallen
round's backtests merge; the fallen policy stays on disk, and the round records what happened.

``state["rounds"][str(n)]["policy_from"]`` is the round whose policy round n trained from (``None``: the
untrained base).  Rounds recorded before this existed trained from round n-1.  The lineage decides what a
round is compared with:

- its exam's regression is judged against the policy it trained from (``parent``);
- a live check of merges made in round n-1 measures round n against a control (``meta_agent.judge.live_control``):
  after a rollback, round n-1 trained from the same policy on the harness without the merges, the plain
  difference; otherwise the trend of round n-1 over *its* parent.

    parent(state["rounds"], n)          # round index or None
    plan = rollback_plan(state["rounds"], n, digest)   # None unless the exam fell
"""

from __future__ import annotations

from meta_agent.heldout_stats import HELDOUT_REGRESSION


def parent(rounds: dict, n: int) -> int | None:
    """The round whose policy round ``n`` trained from (None: the base policy)."""
    info = rounds.get(str(n)) or {}
    if "policy_from" in info:
        return info["policy_from"]
    return n - 1 if n else None


def rollback_plan(rounds: dict, n: int, digest: dict) -> dict | None:
    """Where round n+1 starts when round ``n``'s digest names ``heldout_regression``: round n's own starting
    policy (``policy`` its path, ``round`` the round that produced it, ``commit`` the harness that trained it).
    None when the exam did not fall."""
    if not any(m.get("name") == HELDOUT_REGRESSION for m in digest.get("failure_modes") or []):
        return None
    back_to = parent(rounds, n)
    if back_to is None:
        start = {"policy_ref": None, "harness_commit": None}
    else:
        start = rounds.get(str(back_to)) or {}
    if "policy_ref" not in start:  # that round's record is gone: nothing known to return to
        return None
    source = f"round {back_to}'s policy" if back_to is not None else "the untrained base policy"
    return {"round": back_to, "policy": start["policy_ref"], "commit": start.get("harness_commit"),
            "message": f"round {n}'s exam fell below the policy it trained from, so round {n + 1} trains from "
                       f"{source} again; round {n}'s policy is kept on disk, not trained further"}

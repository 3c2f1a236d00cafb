"""The re-judging rule: which past merges today's judge would reject, from a re-scored archive.

The diagnostics ratchet has two halves.  The gate runs the union of main's and a candidate's
diagnostics on every new branch; ``rescore`` is the retroactive half: when the diagnostics or the
domain's verifier change, every archived round is re-scored by main's current harness and the
current verifier (``meta_agent.judge.rescore``), and each past merge is judged again here.

The rule, for each intervention merge ``M`` still on main:

1. *Its round.*  ``n`` is the first round of the run whose rows were trained on a harness commit
   that contains ``M``'s merge commit: the round ``M`` changed.  No such round yet: ``untrained``.
2. *Its control.*  Round ``n - 1`` was trained without ``M``.  Both rounds are re-scored by the same
   judge (main's current reward, filters and diagnostics; the current verifier), so what differs
   between them is what the policy produced once it trained under ``M``, as in a backtest
   ``main`` and the candidate differ only by the candidate.
3. ``M`` is ``rejudged`` when, on round ``n``:

   a. *diagnostics*: a finding of severity ``error`` is reported that is not an error on round
      ``n - 1`` under the same diagnostics, and that the diagnostics of the time did not report as
      an error on round ``n`` (``rounds/<n>/findings.json``): a judgement made only now.  This is
      the gate's own rule (a new error finding rejects) applied to the round ``M`` trained; or
   b. *verifier*: the current verifier fails rows that training paid (recorded reward at or above
      the domain's paid cut) and that the verifier of the time passed, at a higher share of round
      ``n``'s verified rows than of round ``n - 1``'s (margin zero, as pay for failure is in the gate).

   Otherwise it ``holds``.
4. A round that cannot be judged (no rows left, an unreadable part skipped with
   ``--skip-bad-parts``, main's harness failing on it in the sandbox) makes ``M`` ``unjudged``,
   with the reason: listed, never reverted, never counted as holding.  So does a round whose parts
   were all unreadable when no other round shows ``M`` trained (it may be the one that did).

``--revert`` reverts the ``rejudged`` merges under the rules live reverts follow
(``meta_agent.live_check``): only a merge still on main, newest first, with a trailer that names
the judgement (``Rejudged:``), idempotent across a kill (a merge this rule already reverted is
listed again, not reverted twice), its skill charged one miss; an ``unjudged`` merge never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from harness_repo.gitcmd import HarnessError
from harness_repo.repo import HarnessRepo, Intervention
from harness_repo.trailers import parse_trailers
from meta_agent.skills import record_miss
from meta_agent.templates import harness_name

TRAILER = "Rejudged"


@dataclass
class RoundScore:
    """One round of the run as re-scored: what the rule reads."""

    round: int
    harness_commit: str | None = None
    rows: int = 0
    errors: set[str] = field(default_factory=set)
    """Names of the ``error`` findings of main's current diagnostics on this round."""
    recorded_errors: set[str] = field(default_factory=set)
    """Names of the ``error`` findings the diagnostics of the time reported (``rounds/<n>/findings.json``)."""
    known: int = 0
    paid_failures_now: int = 0
    problems: list[str] = field(default_factory=list)
    """Why this round cannot be judged (bad part skipped, harness failure); empty when it can."""

    @property
    def paid_failure_share(self) -> float:
        return self.paid_failures_now / self.known if self.known else 0.0


def error_names(findings: list[dict]) -> set[str]:
    """The restricted names of the ``error`` findings (harness text is never shown unrestricted)."""
    return {harness_name(f.get("name")) for f in findings if isinstance(f, dict) and f.get("severity") == "error"}


def _first_trained(repo: HarnessRepo, merge: str, rounds: dict[int, RoundScore]) -> int | None:
    for n in sorted(rounds):
        commit = rounds[n].harness_commit
        if commit is None:
            continue
        try:
            if repo.is_ancestor(merge, commit):
                return n
        except HarnessError:  # a commit the repo does not hold (rows imported from elsewhere)
            continue
    return None


def judge_merge(repo: HarnessRepo, iv: Intervention, rounds: dict[int, RoundScore]) -> dict:
    """The rule (module docstring) for one merge: ``{"branch", "merge_commit", "round", "status", "reasons"}``."""
    record = {"branch": iv.branch, "merge_commit": iv.merge_commit, "round": None, "status": "untrained",
              "reasons": []}
    n = _first_trained(repo, iv.merge_commit or "", rounds)
    if n is None:
        unknown = [p for r in rounds.values() if r.harness_commit is None for p in r.problems]
        if unknown:  # a round whose parts could not be read may be the one it trained: not a pass
            record["status"], record["reasons"] = "unjudged", unknown
        else:
            record["reasons"] = ["no archived round was trained with it yet"]
        return record
    record["round"] = n
    after, before = rounds[n], rounds.get(n - 1)
    problems = after.problems + (before.problems if before else [f"round {n - 1} (the control) has no rows"])
    if problems or not after.rows or not before or not before.rows:
        record["status"] = "unjudged"
        record["reasons"] = problems or [f"round {n} or its control round {n - 1} has no re-scored rows"]
        return record
    reasons = [f"finding {name} is an error on round {n} (the first trained with it) but not on round {n - 1}, "
               "and the diagnostics of the time did not report it"
               for name in sorted(after.errors - before.errors - after.recorded_errors)]
    if after.paid_failures_now and after.paid_failure_share > before.paid_failure_share:
        reasons.append(f"the verifier now fails {after.paid_failures_now} of round {n}'s rows that training paid "
                       f"and the verifier of the time passed ({after.paid_failure_share:.3f} of its verified rows, "
                       f"round {n - 1}: {before.paid_failure_share:.3f})")
    record["status"] = "rejudged" if reasons else "holds"
    record["reasons"] = reasons
    return record


def judge_merges(repo: HarnessRepo, rounds: dict[int, RoundScore]) -> list[dict]:
    """The rule for every intervention merge still on main (oldest first)."""
    merged = [iv for iv in repo.interventions() if iv.merge_commit and iv.status == "merged"]
    return [judge_merge(repo, iv, rounds) for iv in sorted(merged, key=lambda iv: iv.round)]


def revert_rejudged(repo: HarnessRepo, verdicts: list[dict], judge: str,
                    message: Callable[[str], None] = lambda s: None) -> list[str]:
    """Revert the ``rejudged`` merges of ``verdicts`` (module docstring); the branches reverted.

    ``judge`` names the re-judging in the trailer, e.g. ``"rescore at main 1a2b3c4d5e6f"``.
    """
    wanted = {v["branch"]: v for v in verdicts if v["status"] == "rejudged"}
    reverted = []
    ivs = [iv for iv in repo.interventions() if iv.branch in wanted and iv.merge_commit]
    for iv in sorted(ivs, key=lambda iv: iv.round, reverse=True):  # newest first: later merges may build on earlier
        if iv.status == "reverted" and iv.revert_commit and TRAILER in parse_trailers(repo.message(iv.revert_commit)):
            record_miss(iv)  # reverted by this rule before a stop: listed, not reverted again
            reverted.append(iv.branch)
            continue
        if iv.status != "merged":
            continue
        why = "; ".join(wanted[iv.branch]["reasons"])
        repo.revert_merge(iv.merge_commit, f"Revert {iv.branch}: re-judged by {judge}: {why}",
                          {TRAILER: f"{judge}: {why}"[:2000]})
        record_miss(iv)
        reverted.append(iv.branch)
        message(f"reverted {iv.branch}: re-judged by {judge}")
    return reverted

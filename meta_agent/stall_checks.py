"""A policy that does not move: main's round trained, yet its greedy exam answers are those of the policy it trained
from (``main:policy_stalled``).

GRPO teaches only a policy that changes.  A learning rate too small for Adam's steps to register, or a KL term that
holds the policy to its reference, spends the round and leaves the policy where it was, and no other finding says
so: rewards, groups, filters and prompts all look healthy.  The exam shows it exactly: it is greedy and sits the
same held-out tasks every round, so a policy that did not move answers each of them word for word as before (the
answers are the same up to rounding ties, ``rl_backend.exam_loop``).  Trusted code on the archive's exam rows and the
trainer's per-step figures; no harness code runs here.

    move = exam_movement(exam_rows, before_rows)            # this round's exam against the round trained from
    check, finding = stall_check(move, knobs, metrics)      # finding None when the policy moved

``meta_agent.main_checks.add_main_findings`` runs it with main's other checks when given the round's exam rows
(``exam``), the earlier policy's (``exam_before``: its exam rows, or round 0's ``base_outcomes``), main's ``knobs``
and the trainer's per-step ``metrics``.

At round 0 the run records only the base policy's verdicts, not its answers' text (``base_outcomes``): verdicts that
did not flip are no proof the answers did not change, so there the check measures, says so, and names nothing.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

PREFIX = "main:"
NAME = "policy_stalled"
SOURCE = "stall_checks"
STALL_SHARE = 0.95
"""At this share of the exam answered word for word as before, the round did not move the policy: a round that
trains changes the greedy answer of some tasks (an answer is a chain of argmaxes; any real step flips a few)."""
MIN_TASKS = 8
"""Fewer exam tasks in both rounds are too few to call a policy unmoved."""
EXAMPLES = 3


class ExamMovement(NamedTuple):
    """How the exam's answers moved between the policy a round trained from and the one it made."""

    tasks: int
    """Exam tasks both policies answered."""
    same_text: int | None
    """Of those, answered word for word as before; None where the earlier answers' text is not recorded (round 0's
    base policy)."""
    same_verdict: int
    """Of those, with the verifier's verdict unchanged."""
    gained: int
    lost: int
    unchanged: list[dict]
    """A few of the unchanged answers (task, response, verdict): the finding's examples."""


def exam_movement(now: list[dict], before: list[dict] | dict[str, float]) -> ExamMovement:
    """This round's exam rows against ``before``: the exam rows of the round it trained from, or the base policy's
    verdicts by task (``base_outcomes``) where only those are recorded."""
    earlier = {str(r.get("task_id")): r for r in before} if isinstance(before, list) else \
        {str(k): {"verified": v} for k, v in before.items()}
    pairs = [(r, earlier[str(r.get("task_id"))]) for r in now if str(r.get("task_id")) in earlier]
    texts = isinstance(before, list)
    same = [(a, b) for a, b in pairs if texts and a.get("response") == b.get("response")]

    def ok(row: dict) -> bool:
        v = row.get("verified")
        return isinstance(v, int | float) and not math.isnan(v) and v >= 0.5

    gained = sum(ok(a) and not ok(b) for a, b in pairs)
    lost = sum(ok(b) and not ok(a) for a, b in pairs)
    return ExamMovement(len(pairs), len(same) if texts else None, len(pairs) - gained - lost, gained, lost,
                        [{"task": str(a.get("task_id")), "response": str(a.get("response"))[:200],
                          "verified": a.get("verified")} for a, _ in same[:EXAMPLES]])


def _last(metrics: list[dict], key: str) -> float | None:
    values = [float(v) for m in metrics if isinstance(v := m.get(key), int | float) and math.isfinite(v)]
    return values[-1] if values else None


def stall_check(move: ExamMovement, knobs: dict, metrics: list[dict]) -> tuple[dict, dict | None]:
    """(the check as the digest records it, the ``main:policy_stalled`` finding or None).  Its rate is the share of
    the exam answered as before; ``evidence`` carries the movement, the knobs that set a step's size and the
    trainer's last KL (where beta > 0 it reports one), the figures a repair aims from."""
    if move.same_text is None or move.tasks < MIN_TASKS:
        why = (f"only {move.tasks} exam tasks in both rounds (at least {MIN_TASKS})" if move.tasks < MIN_TASKS else
               "the earlier policy's answers are not recorded, only its verdicts")
        return {"name": NAME, "passed": True, "detail": f"not measured: {why}; {move.tasks - move.same_verdict} "
                f"verdicts flipped (+{move.gained} -{move.lost})"}, None
    share = move.same_text / move.tasks
    detail = (f"{move.same_text} of {move.tasks} exam answers word for word those of the policy the round trained "
              f"from ({share:.3f}; at most {STALL_SHARE}), {move.tasks - move.same_verdict} verdicts flipped "
              f"(+{move.gained} -{move.lost}); learning_rate {knobs.get('learning_rate')}, beta {knobs.get('beta')}, "
              f"{knobs.get('steps_per_round')} steps")
    check = {"name": NAME, "passed": bool(share < STALL_SHARE), "detail": detail}
    if check["passed"]:
        return check, None
    evidence = {"tasks": move.tasks, "unchanged_share": round(share, 4), "flipped": move.tasks - move.same_verdict,
                "learning_rate": knobs.get("learning_rate"), "beta": knobs.get("beta"),
                "steps_per_round": knobs.get("steps_per_round"), "kl_last": _last(metrics, "kl")}
    return check, {"name": PREFIX + NAME, "source": SOURCE, "severity": "error" if share >= 1.0 else "warning",
                   "rate": round(share, 4), "message": f"the policy did not move this round: {detail}"[:400],
                   "examples": move.unchanged, "evidence": evidence}


EXAM_COLUMNS = ("task_id", "response", "verified", "split", "response_tokens", "truncated", "verifier_info")
"""The exam's verdicts, and what the budget check (``meta_agent.budget_checks``) reads of its answers' lengths."""


def stall_evidence(archive: Any, run_id: str, n: int, trained_from: int | None, base_outcomes: dict | None,
                   knobs: dict, metrics: list[dict]) -> dict:
    """What :func:`meta_agent.main_checks.add_main_findings` needs to judge whether round ``n`` moved the policy, as
    keyword arguments: the round's exam rows, the exam rows of the round it trained from (``trained_from``,
    ``meta_agent.run.lineage.parent``) or, from the base policy, its recorded verdicts, main's knobs and the trainer's
    per-step metrics.  ``archive``: the run's ``rl_backend.archive.Archive``."""
    exam = archive.rows(run_id=run_id, round=n, split="heldout", columns=EXAM_COLUMNS)
    before = archive.rows(run_id=run_id, round=trained_from, split="heldout", columns=EXAM_COLUMNS) \
        if trained_from is not None else base_outcomes
    return {"exam": exam, "exam_before": before, "knobs": knobs, "metrics": metrics}

"""A training budget the exam punishes (``main:budget_over_exam``, ``main:budget_cuts_answers``), as
``main:task_mix`` is a training mix it punishes.

The exam generates each answer within its own budget (trusted: the run's ``evaluation.heldout_max_tokens``, else the
domain's ``exam_max_tokens``).  A training budget above it pays answers the exam cuts off: the policy learns to
take room it will not have when it is measured.  A training budget below what right answers take cuts them in
training: they earn nothing and teach the policy to stop short.  The target either way is what the round's answers
need (``need``: the 90th percentile of the lengths of the answers the verifier accepted that finished, from training
and the exam, plus a quarter; the finished answers' where none was accepted), at most the exam's budget; with no
finished answer, the exam's budget itself.  Trusted code on archive rows and main's knobs; no harness code runs here.

    check, finding = budget_check(rows, {"max_completion_length": 384}, 96)   # finding None when the budget fits
"""

from __future__ import annotations

import math

from harness_repo.contract import GRPOKnobs
from meta_agent.digest_rows import example, has_no_final_answer
from meta_agent.shape_checks import step_shape_check

PREFIX, NAME, SOURCE = "main:", "completion_budget", "budget_checks"
OVER, UNDER = "budget_over_exam", "budget_cuts_answers"
HEADROOM, QUANTILE = 1.25, 0.9
"""What answers need: their 90th percentile plus a quarter (as the truncation recipe's evidence reads it)."""
MAX_CUT = 0.1
"""Above this share of the accepted answers longer than the training budget, the budget cuts what answers need."""


def _finite(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def need(rows: list[dict]) -> tuple[int | None, str, list[int]]:
    """(tokens the answers need, what it rests on, the accepted answers' lengths) from finished answers the verifier
    accepted (training and exam), else every finished answer the verifier could read; None when nothing finished."""
    accepted, finished = [], []
    for r in rows:
        tokens = _finite(r.get("response_tokens"))
        if tokens is None or r.get("truncated") or has_no_final_answer(r) is not False:
            continue
        finished.append(int(tokens))
        if (_finite(r.get("verified")) or 0.0) >= 0.5:
            accepted.append(int(tokens))
    for values, what in ((accepted, "accepted answers"), (finished, "finished answers")):
        if values:
            ordered = sorted(values)
            q = ordered[min(len(ordered) - 1, max(0, math.ceil(QUANTILE * len(ordered)) - 1))]
            return math.ceil(q * HEADROOM), f"90th percentile {q} tokens of {len(values)} {what}", sorted(accepted)
    return None, "no finished answer", []


def budget_check(rows: list[dict], knobs: dict, exam_budget: int | None) -> tuple[dict, dict | None]:
    """(the check as the digest records it, the finding or None).  ``knobs``: main's ``grpo``; ``exam_budget``: the
    exam's tokens per answer.  The finding's ``evidence`` carries the budget, the exam's, what answers need and the
    ``target`` a repair aims at (within the trainer's range)."""
    budget = int(knobs.get("max_completion_length", GRPOKnobs.model_fields["max_completion_length"].default))
    if not isinstance(exam_budget, int) or exam_budget < 1:
        return {"name": NAME, "passed": True, "detail": "not measured: the exam's budget is unknown"}, None
    needed, basis, accepted = need(rows)
    target = exam_budget if needed is None else min(exam_budget, needed)
    train = [r for r in rows if r.get("split", "train") == "train" and _finite(r.get("response_tokens")) is not None]
    paid = [r for r in train if (_finite(r.get("reward")) or 0.0) > 0]
    long_paid = [r for r in paid if r["response_tokens"] > exam_budget]
    long_all = [r for r in train if r["response_tokens"] > exam_budget]
    cut = [n for n in accepted if n > budget]
    evidence = {"budget": budget, "exam_budget": exam_budget, "need": needed, "basis": basis, "target": target,
                "paid": len(paid), "paid_over_exam": round(len(long_paid) / len(paid), 4) if paid else 0.0,
                "over_exam": round(len(long_all) / len(train), 4) if train else 0.0,
                "accepted_cut": round(len(cut) / len(accepted), 4) if accepted else 0.0}
    detail = (f"max_completion_length {budget} against the exam's {exam_budget} tokens; answers need {needed} "
              f"({basis}); {len(long_paid)} of {len(paid)} paid training answers and {len(long_all)} of {len(train)} "
              f"rollouts longer than the exam's budget; {len(cut)} of {len(accepted)} accepted answers longer than "
              f"the training budget")
    if budget > exam_budget:
        name, rate = OVER, round(1 - exam_budget / budget, 4)  # the share of each completion's room the exam cuts
        severity = "error" if long_paid else "warning"
        what = "training pays answers the exam cuts off"
    elif accepted and len(cut) / len(accepted) > MAX_CUT and target > budget:
        name, rate, severity = UNDER, round(len(cut) / len(accepted), 4), "warning"
        what = "training cuts answers the exam accepts"
    else:
        return {"name": NAME, "passed": True, "detail": detail}, None
    examples = [example(r) for r in (long_paid or long_all or train)[:3]] if name == OVER else []
    return ({"name": NAME, "passed": False, "detail": detail},
            {"name": PREFIX + name, "source": SOURCE, "severity": severity, "rate": rate,
             "message": f"{what}: {detail}"[:400], "examples": examples, "evidence": evidence})


def knob_checks(rows: list[dict], knobs: dict, exam_budget: int | None,
                exam: list[dict] = ()) -> tuple[list[dict], list[dict]]:
    """Main's generation knobs judged against the round and the exam: the step's shape
    (``meta_agent.shape_checks``) and the completion budget, whose need also reads the ``exam``'s answers (the
    round's exam rows, generated within the exam's budget: they show lengths a short training budget cuts); (checks,
    findings) for ``add_main_findings``."""
    held = [dict(r, split="heldout") for r in exam]
    out = [step_shape_check(rows, knobs), budget_check([*rows, *held], knobs, exam_budget)]
    return [c for c, _ in out], [f for _, f in out if f is not None]

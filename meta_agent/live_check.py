"""After the next round trains on a merged intervention, measure its live effect.

An intervention merged in round n-1 changed the harness that round n trained on.
Its predictions about digest fields (``truncation_rate decrease``,
``miss_rate decrease``…) are compared between the digests of rounds n-1 and n.
Confirmed interventions become skills; refuted ones are reverted on ``main``
and recorded as misses.  Trusted code: the agent cannot influence any of it.
"""

from __future__ import annotations

from typing import Callable

from harness_repo.repo import HarnessRepo
from meta_agent.gate import parse_effect
from meta_agent.skills import record_miss, record_skill

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


def check_live_effects(repo: HarnessRepo, round: int, digest: dict, previous: list[dict],
                       message: Callable[[str], None] = lambda s: None) -> list[dict]:
    """Judge every intervention merged in ``round - 1``; promote to skill or revert."""
    before = next((d for d in previous if d.get("round") == round - 1), None)
    if before is None:
        return []
    out = []
    for iv in repo.interventions():
        if iv.round != round - 1 or iv.status != "merged":
            continue
        verdicts = {text: judge_prediction(text, before, digest) for text in iv.predicted_effects}
        measured = {k: v for k, v in verdicts.items() if v in ("held", "contradicted")}
        if any(v == "contradicted" for v in measured.values()):
            outcome = "refuted"
            repo.revert_merge(iv.merge_commit, f"Revert {iv.branch}: its predicted effect did not hold in round {round}",
                              {"Live-Check": "; ".join(f"{k} -> {v}" for k, v in verdicts.items())})
            record_miss(iv)
        elif measured and all(v == "held" for v in measured.values()):
            outcome = "confirmed"
            record_skill(repo, iv, round, verdicts, before, digest)
        else:
            outcome = "inconclusive"
        message(f"live check {iv.branch}: {outcome} ({'; '.join(f'{k}: {v}' for k, v in verdicts.items())})")
        out.append({"branch": iv.branch, "outcome": outcome, "predictions": verdicts})
    return out

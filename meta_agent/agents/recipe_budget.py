"""The exam-budget branch of ``truncation``: a training budget the exam punishes -> the budget the round's answers
need, at most the exam's (``main:budget_over_exam`` / ``main:budget_cuts_answers``, ``meta_agent.budget_checks``).

The finding's ``evidence["target"]`` is what the accepted answers need (90th percentile plus a quarter; the finished
answers' where none was accepted), capped by the exam's budget, either way.  No seed value is read; the trainer's
accepted range and the trusted per-round token limit bound it.

    decision = fit_budget(finding, HarnessFiles.read(repo), cap)   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_limits import knob_range
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

MODES = ("main:budget_over_exam", "main:budget_cuts_answers")


def budget_finding(d: dict) -> dict | None:
    """The digest's exam-budget finding with a target, or None."""
    return next((m for m in d.get("failure_modes") or [] if m.get("name") in MODES
                 and isinstance((m.get("evidence") or {}).get("target"), int)), None)


def fit_budget(found: dict, f: HarnessFiles, cap: int, rule: str) -> Decision:
    """max_completion_length -> the finding's target, within the trainer's range and ``cap``."""
    ev = found["evidence"]
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    grpo = config.setdefault("grpo", {})
    old = int(grpo.get("max_completion_length", ev["budget"]))
    low, high = knob_range("max_completion_length")
    new = int(max(low, min(high, cap, ev["target"])))
    if new == old:
        return f"{found['name']} is named, but max_completion_length {old} is already the target"
    grpo["max_completion_length"] = new
    if reason := edits.refusal(config):
        return reason
    grow = new > old
    return Change(
        rule, f"{rule}:max_completion_length={new}", max(0.5, float(found["rate"])),
        f"{'Raise' if grow else 'Lower'} max_completion_length {old} -> {new}: what answers need, within the exam's "
        f"{ev['exam_budget']}",
        f"{found['name']} rate {float(found['rate']):.3f}: {str(found.get('message'))[:240]}; target {ev['target']} "
        f"= answers' need {ev.get('need')} ({ev.get('basis')}), at most the exam's {ev['exam_budget']}.",
        "The exam answers within its own budget: training past it pays answers the exam cuts off, training short "
        "of what right answers take cuts them unpaid. A budget fitted to the answers, never past the exam's, pays "
        "what the exam can accept. The effect is live: archived rollouts cannot show it.",
        ["heldout_accuracy increase: training pays only answers the exam's budget lets finish"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{found['name']} named", root_cause=True)


def budget_evidence(digest: dict, change: Change) -> str | None:
    """For a change of ``max_completion_length`` on a named exam-budget finding: "" when the branch's budget lies
    within what answers need and the exam's budget (exact on the round's answers and the trusted exam), else why
    not; None for any other change.  A generation preview of a few tasks capped at its own budget cannot see what
    the exam cuts.  (For the search agent, beside ``preview_evidence.config_evidence``; not hooked up there.)"""
    found = budget_finding(digest)
    if found is None or "harness.yaml" not in change.files:
        return None
    ev = found["evidence"]
    new = (edits.load_config(change.files["harness.yaml"]).get("grpo") or {}).get("max_completion_length")
    if not isinstance(new, int) or new == ev["budget"]:
        return None
    low = min(int(ev["need"] or ev["exam_budget"]), int(ev["exam_budget"]))
    return "" if low <= new <= int(ev["exam_budget"]) else (
        f"the branch's budget {new} is outside what answers need ({low}) and the exam's {ev['exam_budget']}")

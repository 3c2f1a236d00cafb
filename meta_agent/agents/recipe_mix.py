"""The task-mix recipe: main trains a task kind far less than the exam weighs it -> weights at the exam's shares.

``main:task_mix`` (``meta_agent.main_checks.task_mix_check``) compares main's harness.yaml task weights with the
trusted exam's (the domain's ``eval_specs``) and carries both shares per kind.  The target is that evidence: each
kind the exam weighs gets its exam share as its weight (so a kind trained too much falls as one trained too little
rises: either way); a kind the exam does not weigh keeps its share of what remains; a kind main does not train at
all is not added (that needs its generator config): the recipe declines and says so.  No seed value is a target.

    decision = exam_mix(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

MODE = "main:task_mix"


def exam_mix(d: dict, f: HarnessFiles) -> Decision:
    """Weights at the exam's shares for the kinds it weighs, from the finding's measured shares."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE and isinstance(m.get("shares"), dict)]
    if not found:
        return f"no {MODE} finding (main's task mix is within the exam's)"
    shares: dict[str, dict] = found[0]["shares"]
    config = f.config
    tasks = [t for t in config.get("tasks") or [] if isinstance(t, dict)]
    total = sum(float(t.get("weight", 1.0)) for t in tasks) or 1.0
    outside = sum(float(t.get("weight", 1.0)) / total for t in tasks if str(t.get("name")) not in shares)
    scale = max(1e-6, 1.0 - outside)  # the exam's kinds share what the kinds it does not weigh leave
    before = {str(t.get("name")): round(float(t.get("weight", 1.0)) / total, 3) for t in tasks}
    for t in tasks:
        name = str(t.get("name"))
        t["weight"] = round(float(shares[name]["exam"]) * scale, 4) if name in shares else \
            round(float(t.get("weight", 1.0)) / total, 4)
    missing = [k for k in shares if k not in {str(t.get("name")) for t in tasks}]
    if missing:
        return f"main does not train {missing} at all; adding a task kind needs its generator config"
    if reason := edits.refusal(config):
        return reason
    after = {str(t.get("name")): t["weight"] for t in tasks}
    return Change(
        "exam-mix", "exam-mix:" + ",".join(f"{k}={v:g}" for k, v in sorted(after.items())), float(found[0]["rate"]),
        "Train each task kind at the exam's share",
        f"{MODE} rate {found[0]['rate']:.3f}: {str(found[0].get('message'))[:200]}; shares {before} -> {after}.",
        "A kind the exam weighs but training barely draws is barely learned, and the exam counts it in full; "
        "training at the exam's shares spends the steps where the exam measures.",
        ["heldout_accuracy increase: every kind the exam weighs is trained at its share"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{MODE} named", root_cause=True)

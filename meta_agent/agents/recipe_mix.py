"""The task-mix recipe: main trains a task kind far less than the exam weighs it -> weights at the exam's shares.

``main:task_mix`` (``meta_agent.main_checks.task_mix_check``) compares main's harness.yaml task weights with the
trusted exam's (the domain's ``eval_specs``) and carries both shares per kind.  The target is that evidence: each
kind the exam weighs gets its exam share as its weight (so a kind trained too much falls as one trained too little
rises: either way); a kind the exam does not weigh keeps its share of what remains; a kind main does not train at
all is not added where names are the kinds (math: that needs its generator config): the recipe declines and says so;
where names draw kinds (SWE's ``all``, a package, a task id), the mix is rewritten one entry per kind.  No seed value
is a target.

    decision = exam_mix(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from collections.abc import Callable

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.main_checks import mix_shares, task_kinds
from meta_agent.names import get_domain


def mix_of(config: dict) -> tuple[Callable[[str, str], dict[str, float]], list[dict], dict[str, dict]] | str:
    """(the domain's kinds by name, main's task entries, name -> entry for each name that is its own kind), or why
    not (an unknown domain)."""
    try:
        kinds = task_kinds(get_domain(str(config.get("domain"))))
    except ValueError as exc:
        return str(exc)
    tasks = [t for t in config.get("tasks") or [] if isinstance(t, dict)]
    return kinds, tasks, {str(t.get("name")): t for t in tasks
                          if kinds(str(t.get("name")), "train") == {str(t.get("name")): 1.0}}

MODE = "main:task_mix"


def exam_mix(d: dict, f: HarnessFiles) -> Decision:
    """Weights at the exam's shares for the kinds it weighs, from the finding's measured shares.  Where main's
    names are not its kinds (SWE's ``all`` or a task id draws packages), the mix is rewritten as one entry per
    kind: a name's weight cannot move one of the kinds it draws without the others."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE and isinstance(m.get("shares"), dict)]
    if not found:
        return f"no {MODE} finding (main's task mix is within the exam's)"
    shares: dict[str, dict] = found[0]["shares"]
    config = f.config
    mix = mix_of(config)
    if isinstance(mix, str):
        return mix
    kinds, tasks, own = mix
    now = mix_shares([(str(t.get("name")), float(t.get("weight", 1.0))) for t in tasks], kinds, "train")
    scale = max(1e-6, 1.0 - sum(w for k, w in now.items() if k not in shares))  # what the other kinds leave
    target = {k: round(float(v["exam"]) * scale, 4) for k, v in shares.items()}
    target |= {k: round(w, 4) for k, w in now.items() if k not in shares}
    missing = [k for k in shares if k not in now and k not in own]
    if missing and len(own) == len(tasks):  # every name is its kind: a kind main lacks needs its generator config
        return f"main does not train {missing} at all; adding a task kind needs its generator config"
    before = {k: round(w, 3) for k, w in now.items()}
    config["tasks"] = [dict(own[k], weight=w) if k in own else {"name": k, "weight": w}
                       for k, w in sorted(target.items()) if w > 0]
    if reason := edits.refusal(config):
        return reason
    after = {str(t["name"]): t["weight"] for t in config["tasks"]}
    return Change(
        "exam-mix", "exam-mix:" + ",".join(f"{k}={v:g}" for k, v in sorted(after.items())), float(found[0]["rate"]),
        "Train each task kind at the exam's share",
        f"{MODE} rate {found[0]['rate']:.3f}: {str(found[0].get('message'))[:200]}; shares {before} -> {after}.",
        "A kind the exam weighs but training barely draws is barely learned, and the exam counts it in full; "
        "training at the exam's shares spends the steps where the exam measures.",
        ["heldout_accuracy increase: every kind the exam weighs is trained at its share"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{MODE} named", root_cause=True)

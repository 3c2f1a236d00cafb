"""The step-shape branch of ``larger-groups``: a step of too few prompts for the round's flat groups, or of groups
too small to mix -> the shape ``main:step_shape`` (``meta_agent.shape_checks``) found best at the same rollouts a
step, either way.

The finding's ``evidence["best"]`` is the target: the (group_size, prompts_per_step) pair of the step's rollouts
whose expected share of steps with no gradient is lowest, among groups large enough to mix at the round's solve
rate.  No seed value is read; the trainer's accepted ranges bound the shapes scored.

    decision = reshape_step(finding, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.shape_checks import MARGIN

MODE = "main:step_shape"


def step_shape_finding(d: dict) -> dict | None:
    """The digest's ``main:step_shape`` with a target shape, or None."""
    return next((m for m in d.get("failure_modes") or [] if m.get("name") == MODE
                 and isinstance((m.get("evidence") or {}).get("best"), dict)), None)


def reshape_step(found: dict, f: HarnessFiles, rule: str) -> Decision:
    """main's (group_size, prompts_per_step) -> the finding's best shape, the rollouts a step kept."""
    ev = found["evidence"]
    best = ev["best"]
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    grpo = config.setdefault("grpo", {})
    old = (int(grpo.get("group_size", ev["group_size"])), int(grpo.get("prompts_per_step", ev["prompts_per_step"])))
    new = (int(best["group_size"]), int(best["prompts_per_step"]))
    if new == old:
        return f"{MODE} is named, but main's shape is already {old[1]} prompt(s) of {old[0]}"
    if new[0] * new[1] != old[0] * old[1]:
        return f"{MODE}'s target {new} has other rollouts a step than main's {old}: the finding is stale"
    grpo["group_size"], grpo["prompts_per_step"] = new
    if reason := edits.refusal(config):
        return reason
    what = f"group_size {old[0]} -> {new[0]}, prompts_per_step {old[1]} -> {new[1]}"
    return Change(
        rule, f"{rule}:group_size={new[0]},prompts_per_step={new[1]}", max(0.5, float(found["rate"])),
        f"Reshape each step: {what}",
        f"{MODE} rate {float(found['rate']):.3f}: {str(found.get('message'))[:240]}; the shape scored best "
        f"{best['share']:.3f} (groups of at least {ev.get('min_group_size')}).",
        "A step's gradient is the sum of its prompts' groups and a flat group adds nothing: with few prompts a step "
        "a flat group is a step spent, and each step follows one or two questions; groups too small to mix are flat "
        "by their size. At the same rollouts a step, the shape whose steps most often carry a contrast trains on "
        "more questions a step. The effect is live: archived rollouts cannot show it.",
        ["heldout_accuracy increase: more of each round's steps carry a gradient, over more questions"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{MODE} named", root_cause=True)


def shape_evidence(digest: dict, change: Change) -> str | None:
    """For a change to the step's shape on a named ``main:step_shape``: "" when the branch's shape is one the
    finding scored at least ``MARGIN``-better than main's (exact on the round's groups), else why not; None for any
    other change.  The evidence a generation preview cannot give: a few previewed tasks at another group size say
    nothing of how often a step of the round's questions is flat.  (For the search agent, beside
    ``preview_evidence.config_evidence``; not hooked up there: that file is outside a3's.)"""
    found = step_shape_finding(digest)
    if found is None or "harness.yaml" not in change.files:
        return None
    grpo = edits.load_config(change.files["harness.yaml"]).get("grpo") or {}
    ev = found["evidence"]
    shape = (grpo.get("group_size", ev["group_size"]), grpo.get("prompts_per_step", ev["prompts_per_step"]))
    if shape == (ev["group_size"], ev["prompts_per_step"]):
        return None
    share = (ev.get("shares") or {}).get(f"{shape[0]}x{shape[1]}")
    if share is None:
        return f"the branch's shape {shape[1]} prompt(s) of {shape[0]} was not scored on the round"
    return "" if share <= float(found["rate"]) - MARGIN else (
        f"the branch's shape expects {share:.3f} of steps with no gradient, main's {float(found['rate']):.3f}")

"""The update-size recipe: a round that moved the policy too little or too far -> the learning rate scaled by the
ratio between the movement aimed at and the movement measured, either way.

``main:update_too_small`` / ``main:update_too_large`` (``meta_agent.update_checks``) carry the round's measured
movement (``mean_abs_logp``: mean |delta log p| per token of the round's first group), the band it was judged
against and its ``target`` (the band's middle).  To first order a step's change of log-probs is proportional to the
step, and an Adam step to the learning rate, so the rate is scaled by target / measured; at most ``RESIZE_MOST``
either way a round (the proportion is measured near the current step, not 100x away; the next round measures
again).  The only fixed bounds are the trainer's accepted range (``harness_repo.contract``).  No seed value is read.

    decision = resize_update(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_limits import knob_range
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

MODES = ("main:update_too_small", "main:update_too_large")
RESIZE_MOST = 10.0
"""The most the learning rate moves in one round, either way."""


def resize_update(d: dict, f: HarnessFiles) -> Decision:
    """A round's movement outside the useful band -> learning_rate x (target / measured), bounded by
    ``RESIZE_MOST`` a round and the trainer's accepted range."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") in MODES and isinstance(m.get("evidence"), dict)
             and isinstance(m["evidence"].get("mean_abs_logp"), int | float)
             and isinstance(m["evidence"].get("target"), int | float)]
    if not found:
        return "no main:update_too_small or main:update_too_large finding (the round moved the policy within range)"
    m = found[0]
    ev = m["evidence"]
    measured, target = float(ev["mean_abs_logp"]), float(ev["target"])
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("learning_rate", 1e-5))
    low, high = knob_range("learning_rate")
    factor = min(RESIZE_MOST, max(1.0 / RESIZE_MOST, target / max(measured, 1e-12)))
    new = float(f"{min(high, max(old * factor, 1e-12)):.3g}")
    if new <= low or new == old:
        return f"learning_rate {old:g} is at the trainer's bound ({low:g}, {high:g}]"
    grpo["learning_rate"] = new
    if reason := edits.refusal(config):
        return reason
    up = new > old
    return Change(
        "resize-update", f"resize-update:learning_rate={new:g}", max(0.5, float(m["rate"])),
        f"{'Raise' if up else 'Lower'} learning_rate {old:g} -> {new:g}",
        f"{m['name']} rate {m['rate']:.3f}: {str(m.get('message'))[:220]}; the rate x{factor:.3g} = target "
        f"{target:.3g} / measured {measured:.3g} (at most x{RESIZE_MOST:g} either way a round, within the trainer's "
        f"({low:g}, {high:g}]).",
        "How far one round moves the policy's log-probs on its own completions is, to first order, proportional to "
        "the step, and an Adam step to the learning rate; a rate scaled by the ratio between the useful and the "
        "measured movement makes the next round move the policy by a useful amount. The effect is live: archived "
        "rollouts cannot show it.",
        ["heldout_accuracy increase: " + ("the policy moves usefully on the round's signal" if up else
                                          "the policy keeps what earlier rounds learnt")],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{m['name']} measured by the trainer",
        root_cause=True)

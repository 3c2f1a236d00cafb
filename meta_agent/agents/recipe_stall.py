"""The stalled-policy recipe: the round left the exam's answers as they were -> a larger step, or a looser anchor.

``main:policy_stalled`` (``meta_agent.stall_checks``) measured the share of the greedy exam answered word for word as
before the round (``unchanged_share``) and carries the knobs that set a step's size.  The target comes from that
share, never from a seed: the round moved ``1 - unchanged_share`` of the answers, so the step is scaled by its
inverse, at most ``RAISE_MOST`` a round (nothing moved: the step is below what the exam resolves, and a step past
the measured range is unmeasured); the only fixed bounds are the trainer's accepted range (``harness_repo.contract``).
Where a KL term holds the policy to its reference (beta > 0), that anchor is loosened by the same evidence first:
beta times the share that moved (nothing moved: off).  The other direction, a policy that moved too far and lost
the exam, is ``lower-learning-rate``'s (``heldout_regression``).

    decision = unstall(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_limits import knob_range
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

MODE = "main:policy_stalled"
RAISE_MOST = 10.0
"""The most a learning rate is raised in one round."""


def unstall(d: dict, f: HarnessFiles) -> Decision:
    """A stalled policy -> beta x (share moved) where beta > 0, else learning_rate x min(``RAISE_MOST``, 1 / share
    moved), within the trainer's range."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE and isinstance(m.get("evidence"), dict)]
    if not found:
        return f"no {MODE} finding (the round moved the exam's answers)"
    ev = found[0]["evidence"]
    unchanged = float(ev.get("unchanged_share") or 0.0)
    moved = max(0.0, 1.0 - unchanged)
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    grpo = config.setdefault("grpo", {})
    beta = float(grpo.get("beta", 0.0))
    if beta > 0:
        low, _ = knob_range("beta")
        new = max(low, float(f"{beta * moved:.3g}"))
        grpo["beta"] = new
        what, knob = f"beta {beta:g} -> {new:g}", f"beta={new:g}"
        why = (f"the KL term anchors the policy to its reference; {moved:.3f} of the exam moved, so its weight is "
               "scaled by that share")
    elif any(m.get("name") == "main:update_too_small" for m in d.get("failure_modes") or []):
        return ("main:update_too_small measured the round's movement: resize-update scales the learning rate from "
                "it (one learning-rate branch, not two that conflict)")
    else:
        old = float(grpo.get("learning_rate", 1e-5))
        _, high = knob_range("learning_rate")
        factor = RAISE_MOST if moved <= 1.0 / RAISE_MOST else 1.0 / moved
        new = min(high, float(f"{old * factor:.3g}"))
        if new <= old:
            return f"learning_rate {old:g} is at the trainer's highest {high:g}"
        grpo["learning_rate"] = new
        what, knob = f"learning_rate {old:g} -> {new:g}", f"learning_rate={new:g}"
        why = (f"{moved:.3f} of the exam moved: the step x{factor:.3g} (1 / the share moved, at most "
               f"x{RAISE_MOST:g} a round, within the trainer's (0, {high:g}])")
    if reason := edits.refusal(config):
        return reason
    return Change(
        "unstall", f"unstall:{knob}", min(1.0, unchanged), f"Let the policy move: {what}",
        f"{MODE} rate {found[0]['rate']:.3f}: {str(found[0].get('message'))[:200]}; {why}.",
        "The round trained and left the policy's greedy answers as they were: each update is too small to change "
        "what the policy says, or the KL term pulls it back. A step the exam can resolve lets the round's signal "
        "reach the policy. Archived rollouts cannot show it: the effect is live.",
        ["heldout_accuracy increase: the policy moves on the round's signal"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{MODE} named", root_cause=True)

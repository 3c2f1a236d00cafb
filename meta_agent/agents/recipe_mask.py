"""The unmask-truncation recipe: main masks truncated completions from the loss while answers are cut -> train them.

With ``mask_truncated`` a completion cut by the budget leaves the loss: it earns no negative advantage, so nothing
teaches the policy to finish within its budget, and the cut share of each batch is signal lost.  The evidence is the
round's own batch (its ``truncation_rate``: the share the mask removed); the target is no value of the seed's but
the knob's other side, where every judged completion trains.  Fires only where the digest names a mode a cut answer
causes (``truncation``, ``no_final_answer``) at warning or error.

    decision = unmask_truncation(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.contract import HarnessConfig
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

MODES = ("truncation", "no_final_answer")


def unmask_truncation(d: dict, f: HarnessFiles) -> Decision:
    """``mask_truncated`` false where main masks the cut completions of a round that named a cut-answer mode."""
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    if not HarnessConfig.model_validate(config).grpo.mask_truncated:  # as training reads it ("yes" is true)
        return "main does not mask truncated completions"
    named = [m for m in d.get("failure_modes") or [] if m.get("name") in MODES
             and m.get("severity") in ("warning", "error")]
    rate = d.get("truncation_rate")
    if not named:
        return f"no {' or '.join(MODES)} mode named: masking costs no signal the digest sees"
    if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0:
        return f"truncation_rate {rate}: nothing was cut, so the mask removed nothing"
    config.setdefault("grpo", {})["mask_truncated"] = False
    if reason := edits.refusal(config):
        return reason
    return Change(
        "unmask-truncation", "unmask-truncation:mask_truncated=false", min(1.0, float(rate)),
        "Train truncated completions (mask_truncated true -> false)",
        f"truncation_rate {rate:.3f} of the round's batch was masked from the loss; {named[0]['name']} named "
        f"(rate {float(named[0].get('rate') or 0):.3f}).",
        "A cut completion masked from the loss earns no negative advantage, so nothing teaches the policy to finish "
        "within its budget; trained, its reward of 0 does.",
        ["truncation_rate decrease: cut answers earn their reward of 0 in the loss"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, "mask_truncated and truncation_rate > 0",
        root_cause=True)  # a cut answer that never trains keeps every mode it causes: treated first

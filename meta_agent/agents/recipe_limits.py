"""Recipes for a limit the trainer enforces: a knob fitted to what training measured against it.

A finding of ``main_checks.refusal_finding`` (training refused main, or would) carries ``evidence``: the knob,
its limit, the measured distribution (rendered prompts' token counts, by the real tokenizer and chat template) and
a ``target`` over the longest.  The rule moves the knob to that target, either way, bounded only by the range the
harness contract (what the trainer accepts) and the trusted per-round limits allow.

    from meta_agent.agents.recipe_limits import fit_limit
    decision = fit_limit(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from annotated_types import Ge, Le

from harness_repo.contract import GRPOKnobs, HarnessConfig
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.cost import RoundLimits

LIMIT_KNOBS = {"max_prompt_length": "prompt_tokens"}
"""The limits a trainer enforces that this rule may fit, each with the trusted round limit that caps it."""


def knob_range(knob: str) -> tuple[float, float]:
    """The range the harness contract (what the trainer accepts) gives ``knob``."""
    low, high = float("-inf"), float("inf")
    for m in GRPOKnobs.model_fields[knob].metadata:
        low = float(m.ge) if isinstance(m, Ge) else low
        high = float(m.le) if isinstance(m, Le) else high
    return low, high


def _limit_findings(d: dict) -> list[dict]:
    return [m for m in d.get("failure_modes") or [] if isinstance(m.get("evidence"), dict)
            and m["evidence"].get("knob") in LIMIT_KNOBS and m["evidence"].get("target") is not None]


def fit_limit(d: dict, f: HarnessFiles) -> Decision:
    """A limit training measured main's harness against (``main:prompt_length`` from the trainer's refusal, or from
    ``markup_checks``: a kind of main's mix whose prompts the trainer drops for length, nothing refused)
    -> the knob set to the target the measured distribution gives, within the trainer's accepted range."""
    found = _limit_findings(d)
    if not found:
        return "no finding measured a trainer-enforced limit (rendered prompt lengths against max_prompt_length)"
    m = max(found, key=lambda x: x["rate"])
    ev = m["evidence"]
    knob, target = str(ev["knob"]), int(ev["target"])
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    old = getattr(HarnessConfig.model_validate(config).grpo, knob)
    low, high = knob_range(knob)
    cap = min(high, float(RoundLimits().max_prompt_tokens))
    new = int(max(low, min(cap, target)))
    if new == old:
        return f"{knob} {old} is already the target {target} (range {int(low)}..{int(cap)})"
    if ev.get("longest") is not None and new < int(ev["longest"]) and new < old:
        return f"lowering {knob} to {new} would cut the longest prompt measured ({ev['longest']} tokens)"
    config.setdefault("grpo", {})[knob] = new
    grow = new > old
    return Change(
        "fit-limit", f"fit-limit:{knob}={new}", max(0.5, float(m["rate"])),
        f"{'Raise' if grow else 'Lower'} {knob} {old} -> {new}",
        f"{m['name']} rate {m['rate']:.3f}: {m['message'][:200]}; target {target} = the longest measured "
        f"({ev.get('longest')}) with headroom, within {int(low)}..{int(cap)}.",
        "The trainer measures rendered prompts against this limit and refuses (or skips) those over it; a limit "
        "fitted to the measured lengths lets every drawn task train with its whole prompt.",
        [f"{m['name'].removeprefix('main:')}_rate decrease: the limit covers the measured lengths"]
        if not isinstance(ev.get("dropped"), dict) else  # a kind the trainer dropped for length (markup_checks)
        ["heldout_accuracy increase: every kind of the mix trains, none dropped for its prompts' length"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"{m['name']} measured by the trainer", root_cause=True,
    )


def limit_evidence(digest: dict, change: Change) -> str | None:
    """For a fit-limit change on a finding with measured lengths: "" when every prompt length measured fits the
    branch's limit (exact: the trainer keeps a prompt by this count), else why not; None for any other change.  A
    generation preview cannot see this edit: it renders the tasks it draws and applies no length filter."""
    if change.rule != "fit-limit" or "harness.yaml" not in change.files:
        return None
    found = [m for m in _limit_findings(digest) if (m.get("evidence") or {}).get("lengths")]
    if not found:
        return None
    ev = max(found, key=lambda x: x["rate"])["evidence"]
    knob = str(ev["knob"])
    limit = getattr(HarnessConfig.model_validate(edits.load_config(change.files["harness.yaml"])).grpo, knob)
    over = [x for x in ev["lengths"] if x > limit]
    return f"{len(over)} of {len(ev['lengths'])} measured prompts still exceed {knob}={limit}" if over else ""

"""The search's knob family: what the trainer accepts for each knob (``GRPOKnobs``' bounds), the values a search
tries from main's, and the exact evidence for a move no generation preview can see (``exact_evidence``: a mask
move, ``masking_evidence``; a group-size move, ``group_evidence``).

    values("temperature", 0.7, (0.5, 2.0))             # [0.35, 1.4]
    values("mask_truncated", True, ())                 # [False]
    masking_evidence(digest, main_grpo, branch_grpo)   # (0.125, "completions masked from the loss 0.125 -> 0.000 ...")
"""

from __future__ import annotations

import math

from harness_repo.contract import GRPOKnobs
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_evidence import evidence
from meta_agent.agents.recipe_generation import TEMPERATURE_RANGE
from meta_agent.agents.recipe_shape import step_shape_finding
from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.shape_checks import MARGIN

FROM_ZERO = {"beta": (0.02, 0.1)}
"""Where a number is 0 no factor moves it: these values instead."""
FLAGS = ("mask_truncated", "dynamic_sampling")
"""The trainer's boolean knobs: each flipped (both ways: whichever value main has, the other)."""
LOSS_ONLY = frozenset({"mask_truncated", "dynamic_sampling"})
"""Knobs of which completions reach the loss: like the training-only ones, they change no generated token."""
GROUP_ONLY = frozenset({"group_size", "prompts_per_step"})
"""A move of how many completions a prompt gets (and how many prompts a step), not of how each is generated."""


def shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}"


def bounds(knob: str) -> tuple[float, float, bool]:
    """(lowest, highest, whether the lowest itself is refused) the trainer accepts for ``knob``."""
    lo, hi, open_ = -math.inf, math.inf, False
    for bound in GRPOKnobs.model_fields[knob].metadata:
        lo, open_ = (bound.ge, False) if hasattr(bound, "ge") else (bound.gt, True) if hasattr(bound, "gt") \
            else (lo, open_)
        hi = bound.le if hasattr(bound, "le") else hi
    if knob == "temperature":
        lo, hi, open_ = max(lo, TEMPERATURE_RANGE[0]), min(hi, TEMPERATURE_RANGE[1]), False
    return lo, hi, open_


def values(knob: str, old: object, factors: tuple[float, ...]) -> list[object]:
    """What a search tries for ``knob`` from ``old``: a flag's other value; a number's steps, within its bounds."""
    if knob in FLAGS:
        return [not bool(old)]
    if not isinstance(old, int | float) or isinstance(old, bool):
        return []
    lo, hi, open_ = bounds(knob)
    out = []
    for new in (FROM_ZERO.get(knob, ()) if old == 0 else (old * f for f in factors)):
        new = int(round(new)) if isinstance(old, int) else float(f"{new:.3g}")
        new = min(hi, max(lo, new))
        if new != old and not (open_ and new <= lo) and new not in out:  # two steps clamped to one bound: one
            out.append(new)
    return out


def read_rates(**named: object) -> tuple[dict[str, float] | None, str]:
    """The named digest figures as rates (real numbers in [0, 1]), or (None, why not): a figure missing or not a
    number is unknown, one outside [0, 1] (or NaN) is corrupt, and neither may read as evidence, since the formulas
    built on a rate give a number for any input."""
    read = {k: float(v) for k, v in named.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if unknown := [k for k in named if k not in read]:
        return None, f"the round's {' and '.join(unknown)} is unknown"
    if corrupt := [f"{k} {v!r}" for k, v in read.items() if not 0 <= v <= 1]:
        return None, (f"the round's {' and '.join(corrupt)} lies outside [0, 1]: the digest's evidence is corrupt "
                      "(rebuild the digest)")
    return read, ""


def masking_evidence(digest: dict, main: dict, new: dict) -> tuple[float | None, str]:
    """(the share of main's batch a ``mask_truncated`` move returns to the loss, negative where it takes it out;
    why).  Masking moves no generated token, so no generation preview can see it, and what a masked truncation costs
    is not the truncation rate (the same batch is cut either way) but the cut completions' signal: under the mask
    a cut answer earns no negative advantage, so nothing teaches the policy to finish within its budget.  Exact on
    the round: the truncated share of its batch is what the mask removed."""
    read, why = read_rates(truncation_rate=digest.get("truncation_rate"))
    if read is None:
        return None, f"{why}: what masking costs cannot be read"
    rate = read["truncation_rate"]
    before, after = (rate if g.get("mask_truncated") else 0.0 for g in (main, new))
    return round(before - after, 4), (f"completions masked from the loss {before:.3f} -> {after:.3f} of main's "
                                      f"batch (truncation_rate {rate:.3f}; masking moves no generated token: the "
                                      "same batch, its cut answers trained or not)")


def group_evidence(digest: dict, main: dict, new: dict) -> tuple[float | None, str]:
    """(how much smaller a share of groups is expected flat at the branch's group size than at main's, at the
    round's solve rate; why).  A group size changes how many completions a prompt gets, not how each is generated:
    a generation preview at another size differs from main's on the per-completion rates by sampling noise its task
    bootstrap does not cover, and its identical share rises with the members by counting (tiny-groups, recipe set
    14: groups of 2 -> 6 read identical 0.250 -> 0.333 and the unsolved share [+0.083, +0.500], and the recipe's right
    edit was withheld).  Exact on the round instead: a group is flat when its members share one verdict,
    p^G + (1-p)^G at solve rate p.  Where any of the round's groups mixed verdicts (its zero-variance share below 1),
    some prompt's solve rate lies strictly between 0 and 1, and its groups are strictly less often flat at a larger
    size: the sign is exact, the size (at the pooled rate) an upper bound."""
    read, why = read_rates(verified_rate=evidence(digest).get("verified_rate"),
                           zero_variance_share=digest.get("zero_variance_share"))
    if read is None:
        return None, f"{why}: no group size is judged on it"
    p, share = read["verified_rate"], read["zero_variance_share"]
    low = GRPOKnobs.model_fields["group_size"].metadata  # the trainer's bound on a group's members
    least = next((int(m.ge) for m in low if getattr(m, "ge", None) is not None), 2)
    if bad := [f"group_size {g.get('group_size')!r}" for g in (main, new)
               if not isinstance(g.get("group_size"), int) or isinstance(g.get("group_size"), bool)
               or g["group_size"] < least]:
        return None, f"{' and '.join(bad)} is no group the trainer runs (at least {least} members): no evidence"
    before, after = (p ** int(g["group_size"]) + (1 - p) ** int(g["group_size"]) for g in (main, new))
    shown = (f"groups expected flat {before:.3f} -> {after:.3f} at the round's solve rate {p:.3f} (groups of "
             f"{main['group_size']} -> {new['group_size']}, zero_variance_share {share:.3f})")
    if share >= 1:
        return 0.0, shown + "; no group of the round mixed verdicts, so no size is known to mix them"
    return round(before - after, 4), shown


def exact_evidence(digest: dict, main: dict, new: dict) -> tuple[float | None, str, str] | None:
    """(score, why, why withheld or "") for a harness.yaml move the round's own batch judges exactly (``main`` and
    ``new``: the grpo knobs with the trainer's defaults filled in), where a generation preview cannot: a mask move
    or a group-size move; None for any other move."""
    moved = {k for k in set(main) | set(new) if main.get(k) != new.get(k)}
    if moved == {"mask_truncated"}:
        score, why = masking_evidence(digest, main, new)
        return score, why, "" if score is not None and score > 0 else f"the mask move returns no signal: {why}"
    if "group_size" in moved and moved <= GROUP_ONLY:
        score, why = group_evidence(digest, main, new)
        return score, why, "" if score is not None and score > 0 else f"the group size mixes no more verdicts: {why}"
    return None


def shape_edits(digest: dict, files: HarnessFiles) -> list[Change]:
    """The search's shapes for a named ``main:step_shape``: every (group_size, prompts_per_step) the finding scored on
    the round at the step's rollouts that expects at least ``MARGIN`` fewer steps with no gradient than main's, best
    first.  Each is judged exactly by ``recipe_shape.shape_evidence`` (a generation preview cannot see it); none is
    hooked into ``search.candidates`` yet (outside a3's files)."""
    found = step_shape_finding(digest)
    if found is None:
        return []
    ev, now = found["evidence"], float(found["rate"])
    out = []
    for key, share in sorted((ev.get("shares") or {}).items(), key=lambda kv: kv[1]):
        size, prompts = (int(x) for x in key.split("x"))
        if share > now - MARGIN or size < int(ev.get("min_group_size") or 2):
            continue
        config = files.config
        config.setdefault("grpo", {}).update(group_size=size, prompts_per_step=prompts)
        if edits.refusal(config):
            continue
        out.append(Change("search", f"search:group_size={size},prompts_per_step={prompts}", 0.0,
                          f"Search: {prompts} prompt(s) of {size} a step", f"shape scored {share:.3f} of steps with "
                          f"no gradient on the round, main's {now:.3f}", "more steps carry a gradient",
                          [f"heldout_accuracy increase: {prompts} prompt(s) of {size} a step"],
                          {"harness.yaml": edits.dump_config(config, files.config_text)}))
    return out

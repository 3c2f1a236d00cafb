"""The slice recipe: a task kind off the exam that returns no learning signal -> its weight down by what its groups
measured, toward the kinds that do.

``main:dead_slice`` (``meta_agent.slice_checks``) carries each kind's groups, groups with signal and solve rate.  A
dead kind's weight is scaled by its signal share against the other kinds' pooled share: a kind whose groups return
signal at a tenth of the others' rate gets a tenth of its weight.  A kind with no group with signal is estimated at
half a group over its groups plus one (so a finite sample never cuts a kind to nothing: later rounds measure it
again); the other kinds keep their weights, so their shares rise.  A dead kind the exam weighs keeps its weight: it is
measured, so its difficulty falls instead (``curriculum-step``, which halves the difficulty knobs of a kind no rollout
solved).  No seed value is a target.

    decision = slice_mix(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.agents.recipe_mix import mix_of
from meta_agent.main_checks import mix_shares

MODE = "main:dead_slice"


def signal_estimate(signal: int, groups: int) -> float:
    """A kind's share of groups with signal, with half a group added (never 0 on a finite sample)."""
    return (signal + 0.5) / (groups + 1)


def slice_weights(evidence: dict, weights: dict[str, float]) -> dict[str, float]:
    """Each dead kind off the exam named in ``weights`` (a name that is its own kind) at its weight times its
    signal estimate over the other kinds' pooled share; kinds not moved are left out."""
    live = evidence.get("live") or {}
    share = live.get("share")
    if not isinstance(share, int | float) or share <= 0:
        return {}
    out = {}
    for kind, f in (evidence.get("kinds") or {}).items():
        if f.get("dead") and not f.get("on_exam") and kind in weights:
            ratio = min(1.0, signal_estimate(int(f["signal"]), int(f["groups"])) / float(share))
            out[kind] = round(weights[kind] * ratio, 4)
    return out


def slice_mix(d: dict, f: HarnessFiles) -> Decision:
    """Off-exam dead kinds' weights down by their measured signal against the other kinds'; on-exam ones left to
    ``curriculum-step``."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE and isinstance(m.get("evidence"), dict)]
    if not found:
        return f"no {MODE} finding (every kind in main's mix returns signal, or too few groups say otherwise)"
    evidence = found[0]["evidence"]
    config = f.config
    mix = mix_of(config)
    if isinstance(mix, str):
        return mix
    kinds, tasks, entries = mix
    own = {name: float(t.get("weight", 1.0)) for name, t in entries.items()}
    moved = {k: w for k, w in slice_weights(evidence, own).items() if w < own[k]}
    if not moved:
        dead = [k for k, v in (evidence.get("kinds") or {}).items() if v.get("dead")]
        return (f"the dead kinds {dead} are on the exam (their difficulty is curriculum-step's) or not names of "
                "main's mix; no other kind returns signal to move weight to")
    before = mix_shares([(str(t.get("name")), float(t.get("weight", 1.0))) for t in tasks], kinds, "train")
    for t in tasks:
        if str(t.get("name")) in moved:
            t["weight"] = moved[str(t.get("name"))]
    if reason := edits.refusal(config):
        return reason
    after = mix_shares([(str(t.get("name")), float(t.get("weight", 1.0))) for t in tasks], kinds, "train")
    figures = evidence["kinds"]
    why = "; ".join(f"{k}: {figures[k]['signal']} of {figures[k]['groups']} groups with signal, solve rate "
                    f"{figures[k]['solve_rate']}, weight {own[k]:g} -> {w:g}" for k, w in sorted(moved.items()))
    return Change(
        "slice-mix", "slice-mix:" + ",".join(f"{k}={w:g}" for k, w in sorted(moved.items())), float(found[0]["rate"]),
        "Move training weight off task kinds that return no learning signal",
        f"{MODE} rate {found[0]['rate']:.3f}: {why}; the other kinds {evidence['live']['signal']} of "
        f"{evidence['live']['groups']} groups with signal; shares {({k: round(v, 3) for k, v in before.items()})} -> "
        f"{({k: round(v, 3) for k, v in after.items()})}.",
        "GRPO learns only from groups whose rewards differ; a kind the exam never asks whose groups are all wrong "
        "spends its prompts on nothing. Weighting it by the signal its groups returned puts those prompts on the "
        "kinds that return signal, which the exam measures.",
        ["zero_variance_share decrease: fewer prompts drawn from a kind whose groups are all flat",
         "heldout_accuracy increase: the exam's kinds get the prompts the dead kind wasted"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, f"{MODE} named", root_cause=True)


def slice_evidence(digest: dict, change: Change) -> str | None:
    """For a ``slice-mix`` change: "" when the branch's weights are those the finding's evidence sizes, applied to
    main's (exact: the check's figures re-read on the branch's harness.yaml), else why not; None for any other
    change.  (The search agent reads it beside ``preview_evidence.config_evidence``.)"""
    found = [m for m in digest.get("failure_modes") or [] if m.get("name") == MODE
             and isinstance(m.get("evidence"), dict)]
    if change.rule != "slice-mix" or not found or "harness.yaml" not in change.files:
        return None
    tasks = edits.load_config(change.files["harness.yaml"]).get("tasks") or []
    weights = {str(t.get("name")): float(t.get("weight", 1.0)) for t in tasks if isinstance(t, dict)}
    figures = found[0]["evidence"]["kinds"]
    dead = {k for k, v in figures.items() if v.get("dead") and not v.get("on_exam")}
    main_share = sum(v["share"] for k, v in figures.items() if k in dead)
    total = sum(weights.values()) or 1.0
    branch_share = sum(w for k, w in weights.items() if k in dead) / total
    if not dead or branch_share >= main_share:
        return (f"the branch trains the dead kinds {sorted(dead)} at {branch_share:.3f} of its mix "
                f"(main {main_share:.3f})")
    return ""

"""What a preview proves about a proposed edit: the search agent's rule for proposing an edit the backtest cannot
see (``lacks_evidence``), the score a generation preview gives (``generation_score``), and which edits need one.

An edit changes what the policy generates when it touches harness.yaml or prompts/ (``changes_generation``);
reward, filters and diagnostics are replayed by the backtest on the archive.  Knobs of how the policy trains
(``TRAINING_ONLY``) change no generated batch, so no preview ranks them; a task-mix edit's evidence is the trusted
check re-run on the branch (``config_evidence``)."""

from __future__ import annotations

from types import SimpleNamespace

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import REMEDIES
from meta_agent.agents.recipe_example import text_evidence
from meta_agent.agents.recipe_mix import MODE as MIX_MODE
from meta_agent.agents.recipes import Change, HarnessFiles
from meta_agent.generation_preview import SYMPTOM
from meta_agent.main_checks import task_mix_check


def generation_score(out: dict) -> tuple[float | None, str]:
    """How far a generation preview moved the symptom down, less any rise of answers the verifier cannot read (a
    hotter sampler that ends every group's repeats in rambling gives GRPO no contrast either); None when the
    symptom could not be judged (every completion ran into the preview's cap, past which its fate is unknown)."""
    if out.get("main") is None or out.get("candidate") is None:
        capped = ((out.get("rates") or {}).get("capped") or {}).get("candidate")
        return None, (f"{out.get('symptom')} not measurable: the preview generates at most "
                      f"{(out.get('settings') or {}).get('candidate', {}).get('generated_budget')} tokens and "
                      f"{capped} of the candidate's completions were still going there, {out.get('seconds')} s")
    moved = out["main"] - out["candidate"]
    unreadable = (out.get("rates") or {}).get("no_final_answer") or {}
    penalty = max(0.0, unreadable.get("delta") or 0.0) if out.get("symptom") not in ("no_final_answer", "all") else 0.0
    interval = out.get("interval")
    why = (f"{out.get('symptom')} {out['main']:.3f} -> {out['candidate']:.3f}"
           + (f" (difference [{interval[0]:+.3f}, {interval[1]:+.3f}] over {out.get('tasks')} tasks)" if interval
              else "") + (f", unreadable answers +{penalty:.3f}" if penalty else "") + f", {out.get('seconds')} s")
    return moved - penalty, why


EFFECT_MODE = {"zero_variance_share": "zero_variance_groups", "verified_zero_variance_share": "zero_variance_groups",
               "truncation_rate": "truncation", "no_final_answer_rate": "no_final_answer",
               "heldout_accuracy": "heldout_regression"}
"""A predicted effect's field -> the mode whose symptom the generation preview measures for it."""


def lacks_evidence(out: dict) -> str:
    """Why a generation preview is no evidence for proposing its edit ("" when it is).

    The rule, sized for the preview's few tasks (``generation_preview.TASKS``, 4): the symptom's paired bootstrap
    interval (95%, over tasks) must lie below zero.  A percentile bootstrap over 4 tasks excludes zero only when
    (nearly) every task moves the same way: all four down is a sign test at 1/16, a one-sided 0.0625, so a single
    task's luck cannot pass it.  And the solve rate must not fall beyond noise: the unsolved share's interval may
    not lie above zero (where the symptom is the unsolved share itself, the first test covers it).  A preview that
    could not judge either (every completion ran into its cap) is no evidence."""
    symptom, interval = out.get("symptom"), out.get("interval")
    if symptom not in SYMPTOM.values() or interval is None:
        return f"the preview measured no interval on the symptom ({symptom})"
    if interval[1] >= 0:
        return (f"{symptom} difference [{interval[0]:+.3f}, {interval[1]:+.3f}] over {out.get('tasks')} tasks "
                "does not lie below zero")
    unsolved = ((out.get("rates") or {}).get("unsolved") or {}).get("interval")
    if symptom != "unsolved" and unsolved is None:
        return "the solve rate could not be judged on the preview"
    if symptom != "unsolved" and unsolved[0] > 0:
        return f"the solve rate fell beyond noise (unsolved difference [{unsolved[0]:+.3f}, {unsolved[1]:+.3f}])"
    return ""


def vetoes(out: dict) -> str:
    """Why a generation preview stops a recipe's edit ("" when it does not).  A recipe fired on the round's own
    evidence, so its preview is a check for harm, not the only evidence (a search candidate has none else:
    ``lacks_evidence``).  Stopped: a preview with no interval on the symptom; the same symptom on both batches
    (the preview saw the edit move nothing, so its prediction would be its only evidence, the kind of probation
    merge behind 12d's live losses); the symptom's interval above zero, or its rate rising at all (tiny-groups'
    cool-sampling at [+0.000, +0.375] was proposed without that, s38's held-out h3); the solve rate falling, or
    answers the verifier cannot read rising, beyond noise.  An interval the right way that touches zero over 4
    tasks is left to the gate's evidence rule and the live check (recipe set 14: final-answer-prompt's [-0.188,
    +0.000] was withheld and the search arm repaired less than the recipe arm)."""
    symptom, interval = out.get("symptom"), out.get("interval")
    if symptom not in SYMPTOM.values() or interval is None:
        return f"the preview measured no interval on the symptom ({symptom})"
    said = f"{symptom} difference [{interval[0]:+.3f}, {interval[1]:+.3f}] over {out.get('tasks')} tasks"
    if interval[0] > 0:
        return f"{said} lies above zero: the edit made the symptom worse"
    main, cand = out.get("main"), out.get("candidate")
    if interval[0] == 0 and interval[1] == 0 or main == cand:
        return f"{said}: the preview saw the edit move nothing"
    if main is None or cand is None or cand > main:
        return f"{said}: the symptom rose {main} -> {cand}, not the way the edit is for"
    for rate, what in (("unsolved", "the solve rate fell"), ("no_final_answer", "unreadable answers rose")):
        shown = ((out.get("rates") or {}).get(rate) or {}).get("interval")
        if rate != symptom and shown is not None and shown[0] > 0:
            return f"{what} beyond noise ({rate} difference [{shown[0]:+.3f}, {shown[1]:+.3f}])"
    return ""


CONFIG_MODE = MIX_MODE
"""A mode whose symptom is harness.yaml itself (its task weights against the exam's): a branch's evidence is the
trusted check re-run on its file, exact, where a preview of a few tasks drawn by the new mix would compare
different tasks.  (Its benefit, learning the under-trained kind, shows only in a trained round's exam.)"""


def config_evidence(digest: dict, change: Change) -> str | None:
    """For a change remedying :data:`CONFIG_MODE`: "" when the branch's harness.yaml passes the check main fails,
    else why not; None for any other change."""
    if (text := text_evidence(digest, change)) is not None:  # a symptom in the templates' own text: re-read exactly
        return text
    named = [m for m in digest.get("failure_modes") or [] if m.get("name") == CONFIG_MODE
             and change.rule in REMEDIES.get(CONFIG_MODE, ()) and isinstance(m.get("shares"), dict)]
    if not named or "harness.yaml" not in change.files:
        return None
    exam = [SimpleNamespace(name=k, weight=float(v["exam"])) for k, v in named[0]["shares"].items()]
    check, _ = task_mix_check(edits.load_config(change.files["harness.yaml"]).get("tasks") or [], exam)
    return "" if check["passed"] else f"the branch's mix still fails: {check['detail']}"


def symptom_mode(change: Change, digest: dict) -> str | None:
    """The digest mode whose symptom a recipe's generation edit is previewed on: a warning or error mode its rule
    remedies and the preview measures, else the first predicted effect the preview measures; None if neither."""
    for m in digest.get("failure_modes") or []:
        name = str(m.get("name"))
        if m.get("severity") in ("warning", "error") and change.rule in REMEDIES.get(name, ()) and name in SYMPTOM:
            return name
    fields = (e.split(":")[0].split() for e in change.effects)
    return next((EFFECT_MODE[f[0]] for f in fields if f and f[0] in EFFECT_MODE and f[-1] in ("increase",
                                                                                            "decrease")), None)


def changes_generation(change: Change) -> bool:
    """``change`` touches what the policy is asked or how it samples (harness.yaml, prompts/); a change of reward,
    filters or diagnostics alone is replayed by the backtest instead (recipe set 9: a diagnostics-only change was
    held to the generation rule before)."""
    return any(f == "harness.yaml" or f.startswith("prompts/") for f in change.files)


TRAINING_ONLY = frozenset({"learning_rate", "beta", "epsilon", "steps_per_round"})
"""Knobs that change how the policy moves, not what it generates now."""


def trains_only(ctx: AgentContext, change: Change) -> bool:
    """``change`` edits only knobs of how the policy trains (a generated batch is the same under it)."""
    main = (HarnessFiles.read(ctx.repo).config.get("grpo") or {})
    new = (edits.load_config(change.files["harness.yaml"]).get("grpo") or {})
    moved = {k for k in set(main) | set(new) if main.get(k) != new.get(k)}
    return bool(moved) and moved <= TRAINING_ONLY

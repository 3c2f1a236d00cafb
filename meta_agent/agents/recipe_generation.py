"""Recipes for how the policy generates and moves: room to finish, a final-answer line, restrained drift.

    from meta_agent.agents.recipe_generation import truncation
    decision = truncation(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.contract import HarnessConfig
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_budget import budget_finding, fit_budget
from meta_agent.agents.recipe_evidence import evidence, needed_budget
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles, below_threshold, overshoot
from meta_agent.cost import RoundLimits, predict
from meta_agent.heldout_stats import HELDOUT_REGRESSION

TRUNCATION_THRESHOLD = 0.25
NO_FINAL_ANSWER_THRESHOLD = 0.5
MAX_COMPLETION_CAP = 4096
BLIND_GROWTH = 1.5
"""``truncation``'s step when the agent has no archive evidence at all (x2 when the evidence shows nothing
finished: the needed length is past the cut)."""
KL_REWARD_RISE = 0.02
KL_HELDOUT_DROP = 0.02
KL_BETA = 0.02
KL_EPSILON_FACTOR = 0.75
KL_EPSILON_FLOOR = 0.05
LR_MOST, LR_LEAST = 0.5, 0.1
"""``lower-learning-rate`` multiplies the rate by (1 - the share of the exam the policy lost), within these."""
IDENTICAL_THRESHOLD = 0.25
"""At this share of group members repeating another word for word, the sampler is too cold to give GRPO different
answers to contrast (at the seed's 0.7 the untrained policy repeated none of 8; at 0.05, 3 of 8)."""
TEMPERATURE_RANGE = (0.05, 2.0)
"""What the trainer samples with sensibly; the only fixed bounds of the temperature recipes."""
LEARNING_RATE_FLOOR = 1e-6
"""``lower-learning-rate`` goes no lower: below it a round of a few steps moves the policy too little to see."""


def _budget_cap(knobs) -> tuple[int, int]:
    """The budget's trusted bound: the smaller of ``MAX_COMPLETION_CAP`` and the round's token limit over its
    rollouts (``meta_agent.cost.RoundLimits``); and the rollouts."""
    rollouts = predict(knobs).rollouts
    return min(MAX_COMPLETION_CAP, RoundLimits().max_generated_tokens // rollouts), rollouts


def truncation(d: dict, f: HarnessFiles) -> Decision:
    """The budget the verified answers need (``recipe_evidence.needed_budget``), either way; where the exam punishes
    main's budget (``main:budget_over_exam`` / ``main:budget_cuts_answers``), that need at most the exam's budget
    (``recipe_budget``).

    Many completions hit the limit and the answers the verifier accepted (in training or in the exam, whose
    budget is the domain's) need more -> raise it to that; with no finished answer anywhere the length is
    unknown beyond the cut -> double it (x1.5 with no archive evidence at all).  Responses ramble without a
    final line while the budget is over twice what accepted answers need and little is cut -> lower it to that.
    Bounded only by the trusted limits."""
    rate, rambling = d.get("truncation_rate"), d.get("no_final_answer_rate")
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    knobs = HarnessConfig.model_validate(config).grpo
    cap, rollouts = _budget_cap(knobs)
    if (found := budget_finding(d)) is not None and isinstance(fitted := fit_budget(found, f, cap, "truncation"),
                                                               Change):
        return fitted  # the exam punishes main's budget (budget_checks): what answers need, at most the exam's
    old = knobs.max_completion_length
    ev = evidence(d)
    need = needed_budget(ev)
    cut = isinstance(rate, int | float) and rate > TRUNCATION_THRESHOLD
    if cut:
        if not ev:  # no archive to read (an agent without one): a modest step
            new, why = round(old * BLIND_GROWTH), "no archive evidence of the length answers need"
        elif need is None:
            new, why = old * 2, f"no finished answer anywhere: the length needed is past the cut of {old}"
        elif need[0] > old:
            new, why = need[0], f"accepted answers need {need[0]} ({need[1]})"
        else:
            return (f"truncation_rate {rate:.3f}, yet accepted answers need {need[0]} tokens ({need[1]}), within "
                    f"the budget {old}: the cut responses ramble past their answer, the budget is not the cause")
        strength = overshoot(rate, TRUNCATION_THRESHOLD)
    elif need is not None and isinstance(rambling, int | float) and rambling > NO_FINAL_ANSWER_THRESHOLD \
            and old > 2 * need[0]:
        new, why = need[0], f"accepted answers need {need[0]} ({need[1]}) of the budget {old}"
        strength = overshoot(rambling, NO_FINAL_ANSWER_THRESHOLD)
    else:
        return below_threshold(rate, TRUNCATION_THRESHOLD, "truncation_rate") or (
            f"max_completion_length {old} is not over twice what accepted answers need, or responses do not ramble")
    new = min(int(new), cap)
    if new == old:
        return (f"max_completion_length {old} is at its cap {cap} (the smaller of {MAX_COMPLETION_CAP} and the "
                f"round's token limit over {rollouts} rollouts)")
    config.setdefault("grpo", {})["max_completion_length"] = new
    grow = new > old
    # Truncated completions are not masked (mask_truncated): their reward of 0 is what teaches the
    # policy to finish within the limit, the very effect predicted here.
    return Change(
        "truncation", f"truncation:max_completion_length={new}", strength,
        f"{'Raise' if grow else 'Lower'} max_completion_length {old} -> {new}",
        f"truncation_rate {rate if rate is not None else float('nan'):.3f}, no_final_answer_rate "
        f"{rambling if rambling is not None else float('nan'):.3f}; {why}.",
        "Completions are cut before their final answer; room for what accepted answers take lets them finish."
        if grow else "Responses ramble far past the length accepted answers take; a budget fitted to them cuts "
        "the rambling, whose reward of 0 teaches the policy to stop at its answer.",
        ["truncation_rate decrease: room for what accepted answers take" if grow
         else "no_final_answer_rate decrease: a budget fitted to accepted answers stops rambling"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"truncation_rate > {TRUNCATION_THRESHOLD} and accepted answers need more than the budget" if grow
        else f"no_final_answer_rate > {NO_FINAL_ANSWER_THRESHOLD} and the budget over twice what answers need",
        root_cause=grow,
    )


def final_answer_prompt(d: dict, f: HarnessFiles) -> Decision:
    """Most responses lack a final answer -> end the user prompt by asking for it, a best guess included.

    Not a reward credit for the format.  Such a credit pays every wrong answer that has the format,
    by construction, and GRPO normalises rewards within a group: in a group with no correct answer a
    credit of 0.02 gives the formatted wrong answers the same full-size advantage as a credit of 0.5,
    so the policy learns confident wrong answers.  No credit size is both useful and safe; the gate's
    failure_pay (mean pay of kept verified failures, sub-threshold credit included) rejects all but
    the tiniest.  The prompt asks for the line without paying anyone; its effect can only show in the
    next round's rollouts, so the branch merges on probation.  Only where the user prompt does not ask
    already: a policy that ignores the request is not helped by reading it twice.
    """
    rate = d.get("no_final_answer_rate")
    if reason := below_threshold(rate, NO_FINAL_ANSWER_THRESHOLD, "no_final_answer_rate"):
        return reason
    if edits.asks_for_final_line(f.user_prompt):
        return "prompts/user.j2 already asks for the final Answer: line; asking again is no repair"
    return Change(
        "final-answer-prompt", "final-answer-prompt", overshoot(rate, NO_FINAL_ANSWER_THRESHOLD),
        "Ask for a final Answer: line, best guess included, at the end of the user prompt (its own requests for "
        "the value alone taken out)",
        f"no_final_answer_rate {rate:.3f} > {NO_FINAL_ANSWER_THRESHOLD}.",
        "Most responses stop without a final answer line (hedging or trailing off), so the verifier and the "
        "reward score them 0 whatever the working. Asking for the line even when unsure, as the last thing "
        "before the policy writes, makes it answer; the reward is unchanged, so no wrong answer is paid.",
        ["no_final_answer_rate decrease: the prompt asks for the final line even when unsure"],
        {"prompts/user.j2": edits.ask_for_final_line(f.user_prompt)},
        f"no_final_answer_rate > {NO_FINAL_ANSWER_THRESHOLD}",
    )


def kl_clip(d: dict, f: HarnessFiles) -> Decision:
    """Training reward up while held-out accuracy falls -> restrain the policy (KL or a tighter clip)."""
    trends = d.get("trends") or {}
    rise = (trends.get("reward_mean") or {}).get("delta")
    drop = (trends.get("heldout_accuracy") or {}).get("delta")
    if not (isinstance(rise, int | float) and isinstance(drop, int | float)) or rise <= KL_REWARD_RISE \
            or drop >= -KL_HELDOUT_DROP:
        return f"reward_mean delta {rise} with heldout_accuracy delta {drop} is no divergence"
    paired = (d.get("heldout") or {}).get("vs_previous")
    if paired and not paired.get("high", 0.0) < 0:  # the exam's own paired interval: a drop within chance
        return (f"heldout_accuracy delta {drop:+.3f} is within chance (paired 95% interval "
                f"[{paired['low']:+.3f}, {paired['high']:+.3f}] over {paired['n']} tasks)")
    config = f.config
    grpo = config.setdefault("grpo", {})
    if float(grpo.get("beta", 0.0)) < KL_BETA:
        grpo["beta"] = KL_BETA
        what = f"beta -> {KL_BETA}"
    else:
        old = float(grpo.get("epsilon", 0.2))
        if old <= KL_EPSILON_FLOOR:
            return f"beta is on and epsilon is at its floor {KL_EPSILON_FLOOR}"
        grpo["epsilon"] = round(max(KL_EPSILON_FLOOR, old * KL_EPSILON_FACTOR), 4)
        what = f"epsilon {old} -> {grpo['epsilon']}"
    if reason := edits.refusal(config):
        return reason
    return Change(
        # a combined swing of 0.5 (reward up plus held-out down) counts as the strongest signal
        "kl-clip", f"kl-clip:{what.replace(' ', '')}", min(1.0, (rise - drop) / 0.5),
        f"Restrain policy drift: {what}",
        f"reward_mean {rise:+.3f} while heldout_accuracy {drop:+.3f} since the previous round.",
        "The policy is overfitting the training reward; a KL penalty or a tighter clip keeps it closer "
        "to the reference and held-out accuracy should recover. Archived rollouts cannot show it: the "
        "effect is live.",
        ["heldout_accuracy increase: less drift from the reference policy"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"trends.reward_mean.delta > {KL_REWARD_RISE} and trends.heldout_accuracy.delta < -{KL_HELDOUT_DROP}",
    )


def lower_learning_rate(d: dict, f: HarnessFiles) -> Decision:
    """Held-out accuracy fell from the previous round beyond chance (the digest's ``heldout_regression``) ->
    take smaller steps, by the share of what the policy knew that it lost: x(1 - lost share), at most x0.5 and at
    least x0.1, down to a floor.

    Each update moved the policy far enough to lose answers it had; smaller ones keep what it knows while
    it learns.  Its effect shows only in the next round's exam, so the branch merges on probation.
    """
    mode = next((m for m in d.get("failure_modes") or [] if m.get("name") == HELDOUT_REGRESSION), None)
    if mode is None:
        return "the digest names no heldout_regression"
    config = f.config
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("learning_rate", 0.0))
    drop = float(mode.get("rate") or 0.0)
    now = d.get("heldout_accuracy")
    before = (now if isinstance(now, int | float) else 0.0) + drop
    lost = drop / before if before > 0 else 1.0
    factor = min(LR_MOST, max(LR_LEAST, 1.0 - lost))
    new = float(f"{old * factor:.3g}")
    if new < LEARNING_RATE_FLOOR:
        return f"learning_rate {old:g} is at its floor {LEARNING_RATE_FLOOR:g}"
    grpo["learning_rate"] = new
    if reason := edits.refusal(config):
        return reason
    return Change(
        "lower-learning-rate", f"lower-learning-rate:learning_rate={new:g}", min(1.0, drop / 0.1),
        f"Smaller steps: learning_rate {old:g} -> {new:g}",
        f"{mode.get('message', '')}; the policy lost {lost:.0%} of the exam it passed; learning_rate {old:g} "
        f"x{factor:.2f}.",
        "The policy lost held-out answers it had while training on its own rollouts: each update moves it too "
        "far. Smaller steps keep what it knows; the reward and the data are unchanged. Archived rollouts "
        "cannot show it: the effect is live.",
        ["heldout_accuracy increase: smaller updates keep what the policy knew"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"{HELDOUT_REGRESSION} named (held-out fell beyond chance) and learning_rate above {LEARNING_RATE_FLOOR:g}",
        root_cause=True,
    )


def cool_sampling(d: dict, f: HarnessFiles) -> Decision:
    """Most responses trail off without a final answer (beyond those cut by a budget too short for accepted
    answers) and few group members
    repeat each other -> cool the sampler by half that share (x(1 - rate/2)), whatever the seed's temperature.

    A hot sampler makes a small policy ramble past its answer; a cooler one keeps the group's answers on task.
    Where members already repeat each other (``identical_share``), cooling would flatten the groups: no fire.
    Its effect shows only in the next round's rollouts, so the branch merges on probation.
    """
    missing, cut = d.get("no_final_answer_rate"), d.get("truncation_rate")
    config = f.config
    need = needed_budget(evidence(d))
    budget = (config.get("grpo") or {}).get("max_completion_length")
    # a response cut at a budget too short for accepted answers has no final line either: only what such a cut
    # does not explain is rambling; where answers fit the budget, the cut responses rambled past it
    fits = need is not None and isinstance(budget, int | float) and need[0] <= budget
    rate = missing - cut if isinstance(missing, int | float) and isinstance(cut, int | float) and not fits \
        else missing
    if reason := below_threshold(rate, NO_FINAL_ANSWER_THRESHOLD, "no_final_answer_rate beyond truncation"):
        return reason
    identical = evidence(d).get("identical_share")
    if isinstance(identical, int | float) and identical >= IDENTICAL_THRESHOLD:
        return f"identical_share {identical:.3f}: group members already repeat each other; cooling flattens them"
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("temperature", 1.0))
    if old <= 1.0 and not edits.asks_for_final_line(f.user_prompt):
        return (f"temperature {old:g} is no hotter than the policy's own distribution and the prompt does not ask "
                "for the final line: the prompt is the cause (final-answer-prompt)")
    # above 1 the sampler flattens the policy's own distribution: back to it at least, then by the rambling share
    new = round(max(TEMPERATURE_RANGE[0], min(old, 1.0) * (1 - rate / 2)), 2)
    if new >= old:
        return f"temperature {old:g} is at the trainer's lowest {TEMPERATURE_RANGE[0]:g}"
    grpo["temperature"] = new
    if reason := edits.refusal(config):
        return reason
    return Change(
        "cool-sampling", f"cool-sampling:temperature={new:g}", overshoot(rate, NO_FINAL_ANSWER_THRESHOLD),
        f"Cool sampling: temperature {old:g} -> {new:g}",
        f"no_final_answer_rate {rate:.3f} > {NO_FINAL_ANSWER_THRESHOLD} at temperature {old:g}"
        + (f", identical_share {identical:.3f}" if isinstance(identical, int | float) else "") + ".",
        "The policy rambles past its answer, so most responses end without a final line and score 0. A cooler "
        "sampler keeps answers on task; the reward is unchanged, so no wrong answer is paid. Archived rollouts "
        "cannot show it: the effect is live.",
        ["no_final_answer_rate decrease: a cooler sampler stays on task"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"no_final_answer_rate beyond truncation > {NO_FINAL_ANSWER_THRESHOLD} and identical_share < "
        f"{IDENTICAL_THRESHOLD}",
        # hotter than the policy's own distribution (1), the sampler is the likely cause; at or below it a prompt
        # that does not ask for the line is (final-answer-prompt, ahead in rule order)
        root_cause=old > 1.0,
    )


def warm_sampling(d: dict, f: HarnessFiles) -> Decision:
    """Many group members repeat another member word for word (``identical_share``) -> warm the sampler toward the
    policy's own distribution (temperature 1) by twice that share: t + (1 - t) x min(1, 2 x share).

    Identical members have equal rewards: no group size, filter or dropped group gives them a contrast, so
    this is the cause of their flat groups.  Its effect shows only in the next round's rollouts (probation).
    """
    identical = evidence(d).get("identical_share")
    if not isinstance(identical, int | float):
        return "identical_share is unknown (no archive evidence)"
    if identical < IDENTICAL_THRESHOLD:
        return f"identical_share {identical:.3f} is below {IDENTICAL_THRESHOLD}"
    config = f.config
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("temperature", 1.0))
    if old >= 1.0:
        return f"temperature {old:g} already samples the policy's own distribution or hotter"
    # half the members repeating is as sharp as sampling gets: all the way to 1; a quarter, half the way
    new = round(old + (1.0 - old) * min(1.0, 2 * identical), 2)
    if new <= old:
        return f"temperature {old:g} would not rise"
    grpo["temperature"] = new
    if reason := edits.refusal(config):
        return reason
    return Change(
        "warm-sampling", f"warm-sampling:temperature={new:g}", overshoot(identical, IDENTICAL_THRESHOLD),
        f"Warm sampling: temperature {old:g} -> {new:g}",
        f"identical_share {identical:.3f} >= {IDENTICAL_THRESHOLD} at temperature {old:g}: most groups repeat "
        "one answer.",
        "Group members that are the same text get the same reward, so GRPO has nothing to contrast; a warmer "
        "sampler draws different answers to one prompt. Archived rollouts cannot show it: the effect is live.",
        ["zero_variance_share decrease: a warmer sampler draws different answers within a group"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"identical_share >= {IDENTICAL_THRESHOLD} and temperature < 1",
        root_cause=True,
    )

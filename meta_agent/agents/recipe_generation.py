"""Recipes for how the policy generates and moves: room to finish, a final-answer line, restrained drift.

    from meta_agent.agents.recipe_generation import truncation
    decision = truncation(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.contract import HarnessConfig
from harness_repo.repo import SEEDS_DIR
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles, below_threshold, overshoot
from meta_agent.cost import RoundLimits, predict
from meta_agent.heldout_stats import HELDOUT_REGRESSION

TRUNCATION_THRESHOLD = 0.25
NO_FINAL_ANSWER_THRESHOLD = 0.5
TRUNCATION_GROWTH = 1.5
MAX_COMPLETION_CAP = 4096
KL_REWARD_RISE = 0.02
KL_HELDOUT_DROP = 0.02
KL_BETA = 0.02
KL_EPSILON_FACTOR = 0.75
KL_EPSILON_FLOOR = 0.05
LEARNING_RATE_FLOOR = 1e-6
"""``lower-learning-rate`` goes no lower: below it a round of a few steps moves the policy too little to see."""


def _seed_grpo(config: dict) -> dict:
    """The ``grpo`` knobs of the domain's seed harness ({} without one)."""
    seed = SEEDS_DIR / str(config.get("domain")) / "harness.yaml"
    grpo = edits.load_config(seed.read_text()).get("grpo") if seed.is_file() else None
    return grpo if isinstance(grpo, dict) else {}


def truncation(d: dict, f: HarnessFiles) -> Decision:
    """Many completions hit the length limit -> raise it, within the trusted per-round token limit: x1.5, or
    straight back to the domain seed's budget when it is below that."""
    rate = d.get("truncation_rate")
    if reason := below_threshold(rate, TRUNCATION_THRESHOLD, "truncation_rate"):
        return reason
    config = f.config
    if reason := edits.refusal(config):
        return "main's " + reason
    knobs = HarnessConfig.model_validate(config).grpo
    rollouts = predict(knobs).rollouts
    cap = min(MAX_COMPLETION_CAP, RoundLimits().max_generated_tokens // rollouts)
    old = knobs.max_completion_length
    # below the domain seed's budget (a known-workable one), go back to it in one step rather than x1.5 a round
    floor = _seed_grpo(config).get("max_completion_length")
    grown = int(round(old * TRUNCATION_GROWTH))
    new = min(max(grown, int(floor)) if isinstance(floor, int) and old < floor else grown, cap)
    if new <= old:
        return (f"max_completion_length {old} is at or over its cap {cap} (the smaller of {MAX_COMPLETION_CAP} and "
                f"the round's token limit over {rollouts} rollouts)")
    config.setdefault("grpo", {})["max_completion_length"] = new
    # Truncated completions are not masked (mask_truncated): their reward of 0 is what teaches the
    # policy to finish within the limit, the very effect predicted here.
    return Change(
        "truncation", f"truncation:max_completion_length={new}", overshoot(rate, TRUNCATION_THRESHOLD),
        f"Raise max_completion_length {old} -> {new}",
        f"truncation_rate {rate:.3f} > {TRUNCATION_THRESHOLD}.",
        "Completions are cut before their final answer; more room lets them finish. The round stays within "
        "the trusted token limit.",
        ["truncation_rate decrease: more room to finish"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"truncation_rate > {TRUNCATION_THRESHOLD}",
        root_cause=True,
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
        "Ask for a final Answer: line, best guess included, at the end of the user prompt",
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
    take smaller steps: the domain seed's learning rate when above it (a known-workable one, as
    ``cool-sampling`` does for the temperature), else half the current one, down to a floor.

    Each update moved the policy far enough to lose answers it had; smaller ones keep what it knows while
    it learns.  Its effect shows only in the next round's exam, so the branch merges on probation.
    """
    mode = next((m for m in d.get("failure_modes") or [] if m.get("name") == HELDOUT_REGRESSION), None)
    if mode is None:
        return "the digest names no heldout_regression"
    config = f.config
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("learning_rate", 0.0))
    seed = _seed_grpo(config).get("learning_rate")
    new = float(seed) if isinstance(seed, int | float) and old > seed else old / 2
    if new < LEARNING_RATE_FLOOR:
        return f"learning_rate {old:g} is at its floor {LEARNING_RATE_FLOOR:g}"
    grpo["learning_rate"] = new
    if reason := edits.refusal(config):
        return reason
    return Change(
        "lower-learning-rate", f"lower-learning-rate:learning_rate={new:g}", min(1.0, float(mode["rate"]) / 0.1),
        f"Smaller steps: learning_rate {old:g} -> {new:g}",
        f"{mode['message']}; learning_rate {old:g} (seed {seed if seed is not None else 'unknown'}).",
        "The policy lost held-out answers it had while training on its own rollouts: each update moves it too "
        "far. Smaller steps keep what it knows; the reward and the data are unchanged. Archived rollouts "
        "cannot show it: the effect is live.",
        ["heldout_accuracy increase: smaller updates keep what the policy knew"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"{HELDOUT_REGRESSION} named (held-out fell beyond chance) and learning_rate above {LEARNING_RATE_FLOOR:g}",
        root_cause=True,
    )


def cool_sampling(d: dict, f: HarnessFiles) -> Decision:
    """Most responses trail off without a final answer while sampling runs hotter than the domain seed's
    temperature -> go back to the seed's (a known-workable one), as ``truncation`` does for a budget.

    A hot sampler makes a small policy ramble past its answer; the prompt is not at fault then, and a
    cooler sampler keeps the group's answers on task.  Its effect shows only in the next round's rollouts,
    so the branch merges on probation.
    """
    rate = d.get("no_final_answer_rate")
    if reason := below_threshold(rate, NO_FINAL_ANSWER_THRESHOLD, "no_final_answer_rate"):
        return reason
    config = f.config
    seed = _seed_grpo(config).get("temperature")
    if not isinstance(seed, int | float):
        return f"no seed temperature for domain {config.get('domain')!r} to compare with"
    grpo = config.setdefault("grpo", {})
    old = float(grpo.get("temperature", 1.0))
    if old <= seed:
        return f"temperature {old:g} is not above the seed's {seed:g}"
    grpo["temperature"] = new = float(seed)
    if reason := edits.refusal(config):
        return reason
    return Change(
        "cool-sampling", f"cool-sampling:temperature={new:g}", overshoot(rate, NO_FINAL_ANSWER_THRESHOLD),
        f"Cool sampling: temperature {old:g} -> {new:g}",
        f"no_final_answer_rate {rate:.3f} > {NO_FINAL_ANSWER_THRESHOLD} at temperature {old:g} (seed {seed:g}).",
        "Sampling hotter than the domain's seed makes the policy ramble past its answer, so most responses end "
        "without a final line and score 0. A cooler sampler keeps answers on task; the reward is unchanged, "
        "so no wrong answer is paid. Archived rollouts cannot show it: the effect is live.",
        ["no_final_answer_rate decrease: a cooler sampler stays on task"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"no_final_answer_rate > {NO_FINAL_ANSWER_THRESHOLD} and temperature above the seed's",
        root_cause=True,
    )

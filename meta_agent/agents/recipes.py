"""The recipe table: deterministic rules from digest signals to harness changes.

Each rule (a ``Rule``) reads a few digest fields and ``main``'s files (``HarnessFiles``)
and returns either a ``Change`` (the new file texts, the proposal's hypothesis and its
predicted effects) or a ``str`` saying why it did not fire.  A rule commits nothing:
``meta_agent.agents.recipe.RecipeAgent`` ranks the changes and commits them as branches.

Each change is written for the gate (``meta_agent.gate``): it predicts at least one
benefit it can deliver, offline (a gate metric the backtest measures) or live (a
digest field the next round measures, so the merge is on probation), and no guard it
cannot keep; a harness.yaml it writes passes the domain's task check and the trusted
per-round limits (``meta_agent.cost.RoundLimits``), or the rule does not fire.

    from meta_agent.agents.recipes import RULES, HarnessFiles
    decision = RULES[0](digest, HarnessFiles.read(repo))   # a Change, or why not

A new rule is one function here, one entry in ``RULES``, its failure mode in
``REMEDIES``, and its case in ``tests/test_recipe_agent.py`` (a test fails without it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness_repo.contract import HarnessConfig
from harness_repo.repo import SEEDS_DIR, HarnessError, HarnessRepo
from meta_agent.agents import recipe_edits as edits
from meta_agent.config import GateThresholds
from meta_agent.cost import RoundLimits, predict
from meta_agent.digest import MIN_KEPT_SHARE
from meta_agent.domains import get_domain

MISS_RATE_THRESHOLD = 0.2
ZERO_VARIANCE_THRESHOLD = 0.5
TRUNCATION_THRESHOLD = 0.25
NO_FINAL_ANSWER_THRESHOLD = 0.5
CURRICULUM_ACCURACY_THRESHOLD = 0.8
CURRICULUM_MIN_COUNT = 8  # fewer rollouts of a task are too noisy to call it solved
CURRICULUM_KNOBS = ("max_terms", "max_digits")
TRUNCATION_GROWTH = 1.5
MAX_COMPLETION_CAP = 4096
KL_REWARD_RISE = 0.02
KL_HELDOUT_DROP = 0.02
KL_BETA = 0.02
KL_EPSILON_FACTOR = 0.75
KL_EPSILON_FLOOR = 0.05
# The digest's failure modes (trusted ones and the seed's diagnostics) and the rules that work on
# them.  A warning or error mode that no branch of the round addresses is reported, never dropped.
REMEDIES: dict[str, tuple[str, ...]] = {
    "reward_hacking": ("verifier-answers", "seed-reward"),
    "reward_misses": ("verifier-answers", "boxed-answers"),
    "format_failures": ("verifier-answers", "boxed-answers", "final-answer-prompt"),
    "no_final_answer": ("final-answer-prompt", "truncation"),
    "truncation": ("truncation",),
    "zero_variance_groups": ("dynamic-sampling", "larger-groups", "curriculum-step"),
    "zero_variance": ("dynamic-sampling", "larger-groups", "curriculum-step"),
    "filter_drops": ("loosen-filters",),
}
NO_SAFE_EDIT: dict[str, str] = {
    "diagnostics:crashed": "the harness's own diagnostics failed; a recipe that rewrote them could only lower the "
                           "digest's findings, which the gate counts as harm: fix the diagnostic by hand or with "
                           "the LLM agent",
    "diagnostics:invalid": "the harness's diagnostics returned malformed findings; the same as diagnostics:crashed",
    "test_edits": "what a patch that edits the tests earns is the trusted grader's decision; the recipe vocabulary "
                  "(reward, filters, prompt, knobs) has no edit that stops it without shaping the gate cannot check",
    "tampered_grades": "a patch that forges its grade already earns verified 0 and status 'tampered' from the trusted "
                       "grader; a reward edit could only add shaping the gate cannot check",
}
"""Failure modes the digest can name for which no recipe is safe, with why; the round reports them as such."""
LARGER_GROUPS_MAX = 8


@dataclass
class HarnessFiles:
    """The texts of ``main``'s files the rules read (None where a file is absent)."""

    config_text: str
    reward: str | None
    user_prompt: str | None
    filters: str | None = None

    @classmethod
    def read(cls, repo: HarnessRepo, ref: str = "main") -> HarnessFiles:
        def text(path: str) -> str | None:
            try:
                return repo.read_file(ref, path)
            except HarnessError:
                return None

        return cls(repo.read_file(ref, "harness.yaml"), text("reward.py"), text("prompts/user.j2"), text("filters.py"))

    @property
    def config(self) -> dict:
        return edits.load_config(self.config_text)


@dataclass
class Change:
    """What a rule would commit: the new file texts and the proposal around them."""

    rule: str
    key: str
    """Identifies the change itself (rule plus new values), recorded as a trailer."""
    strength: float
    """How far the signal is past its threshold, 0..1; ranks the rules."""
    subject: str
    evidence: str
    hypothesis: str
    effects: list[str]
    """``Predicted-Effect`` lines: at least one benefit (increase/decrease) the change can deliver."""
    files: dict[str, str] = field(default_factory=dict)
    trigger: str = ""
    """The condition on digest fields that fired the rule (the ``Trigger`` trailer, read by skills)."""


Decision = Change | str  # a str says why the rule did not fire
Rule = Callable[[dict, HarnessFiles], Decision]


def overshoot(value: float, threshold: float) -> float:
    return max(0.0, min(1.0, (value - threshold) / max(1.0 - threshold, 1e-9)))


def below_threshold(value: object, threshold: float, name: str) -> str | None:
    if not isinstance(value, int | float):
        return f"{name} is unknown"
    if value <= threshold:
        return f"{name} {value:.3f} is not above {threshold}"
    return None


def boxed_answers(d: dict, f: HarnessFiles) -> Decision:
    """Verified-correct answers the reward does not pay, written as ``\\boxed{}`` -> read them as the verifier does."""
    miss = d.get("miss_rate")
    if reason := below_threshold(miss, MISS_RATE_THRESHOLD, "miss_rate"):
        return reason
    examples = list(d.get("disagreements", {}).get("miss", []))
    examples += [e for m in d.get("failure_modes", []) for e in m.get("examples", [])]
    boxed = sum("\\boxed" in str(e.get("response", "")) for e in examples)
    if not boxed:
        return "no failure example contains \\boxed"
    if f.reward is None:
        return "main has no reward.py to fix"
    if edits.has_marker(f.reward, "boxed-answers") or edits.code_mentions(f.reward, "boxed"):
        return "reward.py already handles \\boxed"
    return Change(
        "boxed-answers", "boxed-answers", overshoot(miss, MISS_RATE_THRESHOLD),
        "Read a final \\boxed{} answer in the reward, as the verifier does",
        f"miss_rate {miss:.3f} > {MISS_RATE_THRESHOLD}; {boxed} failure examples contain \\boxed{{}}.",
        "The reward reads only the last Answer: line, while the verifier takes the last \\boxed{} when it "
        "comes later; verified-correct boxed answers earn 0. Scoring the box in that case pays them "
        "and pays nothing the verifier rejects.",
        ["miss_rate decrease: verified-correct boxed answers are paid",
         "reward_auc increase: the reward reads the answer the verifier reads"],
        {"reward.py": edits.accept_boxed(f.reward)},
        f"miss_rate > {MISS_RATE_THRESHOLD} and a failure example contains \\boxed",
    )


def dynamic_sampling(d: dict, f: HarnessFiles) -> Decision:
    """Most groups have equal rewards (no GRPO signal) -> drop them from the loss (DAPO dynamic sampling)."""
    share = d.get("zero_variance_share")
    if reason := below_threshold(share, ZERO_VARIANCE_THRESHOLD, "zero_variance_share"):
        return reason
    # the gate refuses a batch cut below min_kept_share; then the groups need to change, not go
    min_kept = GateThresholds().min_kept_share
    if 1 - share < min_kept:
        return (f"dropping {share:.3f} of the groups would keep {1 - share:.3f} of the batch, "
                f"below the gate's min_kept_share {min_kept}")
    config = f.config
    grpo = config.setdefault("grpo", {})
    if grpo.get("dynamic_sampling"):
        return "dynamic sampling is already on"
    grpo["dynamic_sampling"] = True
    if reason := edits.refusal(config):
        return reason
    return Change(
        "dynamic-sampling", "dynamic-sampling:grpo.dynamic_sampling=true", overshoot(share, ZERO_VARIANCE_THRESHOLD),
        "Drop zero-variance groups from the loss (dynamic sampling)",
        f"zero_variance_share {share:.3f} > {ZERO_VARIANCE_THRESHOLD}.",
        "Groups whose rewards are all equal have zero advantage and only dilute the batch; dropping them "
        "(the runtime's dynamic_sampling, after the filters) trains each step on groups with signal.",
        # the gate counts signal over the groups the filters keep: dropping flat ones raises it
        ["signal_share increase: every group left in the batch has reward variance",
         "kept_share decrease: zero-variance groups leave the batch"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"zero_variance_share > {ZERO_VARIANCE_THRESHOLD} and 1 - zero_variance_share >= {min_kept}",
    )


def truncation(d: dict, f: HarnessFiles) -> Decision:
    """Many completions hit the length limit -> raise it, within the trusted per-round token limit."""
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
    new = min(int(round(old * TRUNCATION_GROWTH)), cap)
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
    )


def final_answer_prompt(d: dict, f: HarnessFiles) -> Decision:
    """Most responses lack a final answer -> end the user prompt by asking for it, a best guess included.

    Not a reward credit for the format.  Such a credit pays every wrong answer that has the format,
    by construction, and GRPO normalises rewards within a group: in a group with no correct answer a
    credit of 0.02 gives the formatted wrong answers the same full-size advantage as a credit of 0.5,
    so the policy learns confident wrong answers.  No credit size is both useful and safe; the gate's
    failure_pay (mean pay of kept verified failures, sub-threshold credit included) rejects all but
    the tiniest.  The prompt asks for the line without paying anyone; its effect can only show in the
    next round's rollouts, so the branch merges on probation.
    """
    rate = d.get("no_final_answer_rate")
    if reason := below_threshold(rate, NO_FINAL_ANSWER_THRESHOLD, "no_final_answer_rate"):
        return reason
    if edits.has_marker(f.user_prompt, "final-answer-prompt"):
        return "prompts/user.j2 already asks for the final line"
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


def curriculum_step(d: dict, f: HarnessFiles) -> Decision:
    """A task is nearly solved -> make it harder (``max_terms`` or ``max_digits`` + 1, within the domain's bounds)."""
    config = f.config
    try:
        domain = get_domain(str(config.get("domain")))
    except ValueError as exc:
        return str(exc)
    tasks = {t.get("name"): t for t in config.get("tasks", []) if isinstance(t, dict)}
    raised, strength, seen = [], 0.0, []
    for source, stats in sorted(d.get("per_task", {}).items()):
        accuracy, name = stats.get("accuracy"), source.rsplit("/", 1)[-1]
        if not isinstance(accuracy, int | float) or accuracy <= CURRICULUM_ACCURACY_THRESHOLD:
            continue
        seen.append(f"{name} {accuracy:.3f}")
        task = tasks.get(name)
        if stats.get("count", 0) < CURRICULUM_MIN_COUNT or not task or not isinstance(task.get("config"), dict):
            continue
        if (step := edits.harder(domain, name, task["config"], CURRICULUM_KNOBS)) is None:
            continue
        knob, task["config"] = step
        raised.append(f"{name}.{knob}={task['config'][knob]}")
        strength = max(strength, overshoot(accuracy, CURRICULUM_ACCURACY_THRESHOLD))
    if not raised:
        return ("no task in the mix with enough rollouts and a difficulty knob the domain lets rise is above "
                f"{CURRICULUM_ACCURACY_THRESHOLD} accuracy" + (f" ({', '.join(seen)})" if seen else ""))
    if reason := edits.refusal(config):
        return reason
    return Change(
        "curriculum-step", "curriculum-step:" + ",".join(raised), strength,
        f"Raise difficulty: {', '.join(raised)}",
        f"verified accuracy above {CURRICULUM_ACCURACY_THRESHOLD}: {', '.join(seen)}.",
        "Nearly solved tasks give groups that are all correct and carry no signal; harder instances "
        "bring back variance within groups. Archived rollouts cannot show it: the effect is live.",
        ["verified_zero_variance_share decrease: harder tasks split all-correct groups again"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"per_task accuracy > {CURRICULUM_ACCURACY_THRESHOLD} with count >= {CURRICULUM_MIN_COUNT}",
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


def verifier_answers(d: dict, f: HarnessFiles) -> Decision:
    """The reward and the trusted verifier disagree, either way -> pay exactly what the verifier accepts.

    Verified-correct answers left unpaid (``miss_rate``: an ``Answer:`` inside a line, ``x = 7``, a box,
    ``$7$``...) need a reward that reads every form the verifier reads; paid answers the verifier rejects
    (``hack_rate``: ``14/2``, ``6 or 7``, an ``Answer:`` line overridden by a later box) need a stricter
    one.  One reward does both: the verifier's own rules for a numeric gold answer, an exact match
    otherwise (``recipe_edits.verifier_answers``).  Math only: other domains' verifiers run code.
    """
    miss, hack = d.get("miss_rate"), d.get("hack_rate")
    miss = miss if isinstance(miss, int | float) else 0.0
    hack = hack if isinstance(hack, int | float) else 0.0
    shown = d.get("disagreements") or {}
    # the digest shows examples of each disagreement it counts; a rate without one is not evidence
    miss = miss if shown.get("miss") else 0.0
    hack = hack if shown.get("hack") else 0.0
    if miss <= 0 and hack <= 0:
        return "the reward and the verifier agree (no miss or hack example in the digest's disagreements)"
    if f.config.get("domain") != "math":
        return f"the verifier's answer rules are written for the math domain, not {f.config.get('domain')!r}"
    if f.reward is None:
        return "main has no reward.py to fix"
    if edits.has_marker(f.reward, "verifier-answers"):
        return "reward.py already pays exactly the answers the verifier accepts"
    effects, seen = [], []
    if miss > 0:
        effects.append("miss_rate decrease: every answer form the verifier accepts is paid")
        seen.append(f"miss_rate {miss:.3f}")
    if hack > 0:
        effects += ["hack_rate decrease: no answer the verifier rejects is paid",
                    "failure_pay decrease: verified failures earn 0"]
        seen.append(f"hack_rate {hack:.3f}")
    effects.append("reward_auc increase: the reward reads the answer the verifier reads")
    return Change(
        "verifier-answers", "verifier-answers", max(overshoot(miss, 0.0), overshoot(hack, 0.0)),
        "Pay exactly the final answers the verifier accepts",
        f"{' and '.join(seen)} > 0: the reward and the trusted verifier disagree on the same responses.",
        "The reward reads answers differently from the verifier: it leaves verified-correct answers unpaid "
        "(an Answer: not at the start of a line, a box, x = 7) and/or pays answers the verifier rejects "
        "(an unreduced fraction, a hedge, an Answer: line overridden by a later box). A reward that applies the "
        "verifier's answer rules pays every form it accepts and nothing it rejects.",
        effects, {"reward.py": edits.verifier_answers(f.reward)},
        "miss_rate > 0 or hack_rate > 0 with an example in disagreements (math)",
    )


def larger_groups(d: dict, f: HarnessFiles) -> Decision:
    """Most groups are flat and groups are small -> double ``group_size`` and halve ``prompts_per_step``.

    A group of 2 or 4 at 25% accuracy is all-wrong most of the time; a larger group of the same
    tasks mixes right and wrong answers, so GRPO gets a contrast.  Halving the prompts keeps the
    rollouts per step (and the round's cost) as they were.
    """
    share = d.get("zero_variance_share")
    if reason := below_threshold(share, ZERO_VARIANCE_THRESHOLD, "zero_variance_share"):
        return reason
    config = f.config
    grpo = config.setdefault("grpo", {})
    size, prompts = int(grpo.get("group_size", 4)), int(grpo.get("prompts_per_step", 4))
    if size >= LARGER_GROUPS_MAX:
        return f"group_size {size} is already at least {LARGER_GROUPS_MAX}"
    grpo["group_size"] = min(LARGER_GROUPS_MAX, size * 2)
    grpo["prompts_per_step"] = max(1, prompts * size // grpo["group_size"])
    if reason := edits.refusal(config):
        return reason
    what = f"group_size {size} -> {grpo['group_size']}, prompts_per_step {prompts} -> {grpo['prompts_per_step']}"
    return Change(
        "larger-groups", f"larger-groups:group_size={grpo['group_size']}", overshoot(share, ZERO_VARIANCE_THRESHOLD),
        f"Larger GRPO groups: {what}",
        f"zero_variance_share {share:.3f} > {ZERO_VARIANCE_THRESHOLD} with groups of {size}.",
        "Small groups of the same prompt are often all wrong (or all right) and carry no GRPO signal; twice "
        "as many samples per prompt mix outcomes more often, at the same rollouts per step. Archived "
        "rollouts cannot show it: the effect is live.",
        ["zero_variance_share decrease: larger groups mix right and wrong answers"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"zero_variance_share > {ZERO_VARIANCE_THRESHOLD} and group_size < {LARGER_GROUPS_MAX}",
    )


def seed_reward(d: dict, f: HarnessFiles) -> Decision:
    """The reward pays answers the verifier rejects -> go back to the domain's seed reward (exact final answer)."""
    rate = d.get("hack_rate")
    if reason := below_threshold(rate, 0.0, "hack_rate"):
        return reason
    seed = SEEDS_DIR / str(f.config.get("domain")) / "reward.py"
    if not seed.is_file():
        return f"no seed reward.py for domain {f.config.get('domain')!r}"
    if f.reward == seed.read_text():
        return "reward.py is the seed's exact-answer reward already; verifier-answers is the stricter one"
    if edits.has_marker(f.reward, "verifier-answers"):
        return "reward.py applies the verifier's answer rules (verifier-answers), stricter than the seed's"
    return Change(
        "seed-reward", "seed-reward", overshoot(rate, 0.0),
        "Go back to the seed reward, which pays only an exact final answer",
        f"hack_rate {rate:.3f} > 0: verified failures are paid at or above the gate's high_reward.",
        "Some edit since the seed made the reward pay answers the verifier rejects; the seed's reward pays "
        "only a final Answer: line equal to the gold answer, so wrong answers go back to earning 0 (fixes "
        "merged since, e.g. reading \\boxed{}, are lost and may be proposed again).",
        ["hack_rate decrease: the seed reward pays no answer the verifier rejects",
         "failure_pay decrease: verified failures earn 0 again"],
        {"reward.py": seed.read_text()},
        "hack_rate > 0 and reward.py differs from the seed's",
    )


def loosen_filters(d: dict, f: HarnessFiles) -> Decision:
    """The filters keep too little of the batch -> let every trajectory the harness can judge train:
    ``filters.py`` keeps all (its old functions stay above the override), else ``mask_truncated`` off.

    Dynamic sampling is left alone: the groups it drops have equal rewards and no GRPO signal.  The gate
    decides whether what the filter dropped was worth dropping: a filter that kept paid failures out
    shows in the candidate's hack_rate and failure_pay, which it refuses to let rise.
    """
    kept = d.get("kept_share")
    if not isinstance(kept, int | float):
        return "kept_share is unknown (the backend logs no per-step count of kept trajectories)"
    if kept >= MIN_KEPT_SHARE:
        return f"kept_share {kept:.3f} is not below {MIN_KEPT_SHARE}"
    strength = overshoot(1 - kept, 1 - MIN_KEPT_SHARE)
    evidence = f"kept_share {kept:.3f} < {MIN_KEPT_SHARE}: the filters let {kept:.1%} of the round's trajectories train."
    trigger = f"kept_share < {MIN_KEPT_SHARE}"
    if not edits.keeps_everything(f.filters):
        return Change(
            "loosen-filters", "loosen-filters:filters.py=keep-all", strength,
            "Let every judged trajectory train: filters.py keeps all", evidence,
            "The trajectory and group filters drop most of each batch, so each step learns from a few "
            "trajectories and their groups lose the contrast GRPO needs. Keeping every trajectory the harness "
            "can judge trains on the whole batch; the reward, not the filter, decides what is good.",
            ["kept_share increase: the filters keep every trajectory the harness can judge"],
            {"filters.py": edits.keep_everything(f.filters or "")}, trigger)
    config = f.config
    grpo = config.setdefault("grpo", {})
    if not grpo.get("mask_truncated"):
        return ("main's filters keep every trajectory and mask_truncated is off: the drops are dynamic "
                "sampling's flat groups or trajectories the harness could not judge")
    grpo["mask_truncated"] = False
    if reason := edits.refusal(config):
        return reason
    return Change(
        "loosen-filters", "loosen-filters:grpo.mask_truncated=false", strength,
        "Train on truncated completions again (mask_truncated off)", evidence,
        "Masking truncated completions drops most of each batch; trained on as failures (reward as assigned) "
        "they teach the policy to finish within the limit, and the batch keeps its size.",
        ["kept_share increase: truncated completions stay in the loss"],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, trigger)


RULES: tuple[Rule, ...] = (verifier_answers, boxed_answers, dynamic_sampling, truncation, final_answer_prompt,
                           larger_groups, curriculum_step, kl_clip, seed_reward, loosen_filters)

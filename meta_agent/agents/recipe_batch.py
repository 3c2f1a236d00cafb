"""Recipes for what each GRPO step learns from: groups with signal, filters that keep it, harder tasks.

    from meta_agent.agents.recipe_batch import larger_groups
    decision = larger_groups(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles, below_threshold, overshoot
from meta_agent.config import GateThresholds
from meta_agent.digest import MIN_KEPT_SHARE
from meta_agent.domains import get_domain

ZERO_VARIANCE_THRESHOLD = 0.5
CURRICULUM_ACCURACY_THRESHOLD = 0.8
CURRICULUM_MIN_COUNT = 8  # fewer rollouts of a task are too noisy to call it solved
CURRICULUM_KNOBS = ("max_terms", "max_digits")
LARGER_GROUPS_MAX = 8
SMALL_GROUP = 4
"""Below this group size most groups cannot vary at a policy's usual accuracy: the size is the cause of flat
groups, so ``larger-groups`` ranks as a root cause ahead of dropping them (``dynamic-sampling``)."""


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
        root_cause=size < SMALL_GROUP,
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
    evidence = (f"kept_share {kept:.3f} < {MIN_KEPT_SHARE}: the filters let {kept:.1%} of the round's "
                "trajectories train.")
    trigger = f"kept_share < {MIN_KEPT_SHARE}"
    if not edits.keeps_everything(f.filters):
        return Change(
            "loosen-filters", "loosen-filters:filters.py=keep-all", strength,
            "Let every judged trajectory train: filters.py keeps all", evidence,
            "The trajectory and group filters drop most of each batch, so each step learns from a few "
            "trajectories and their groups lose the contrast GRPO needs. Keeping every trajectory the harness "
            "can judge trains on the whole batch; the reward, not the filter, decides what is good.",
            ["kept_share increase: the filters keep every trajectory the harness can judge"],
            {"filters.py": edits.keep_everything(f.filters or "")}, trigger, root_cause=True)
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
        {"harness.yaml": edits.dump_config(config, f.config_text)}, trigger, root_cause=True)


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

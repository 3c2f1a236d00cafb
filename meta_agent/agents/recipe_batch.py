"""Recipes for what each GRPO step learns from: groups with signal, filters that keep it, harder tasks.

    from meta_agent.agents.recipe_batch import larger_groups
    decision = larger_groups(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.contract import TaskSpec
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_evidence import evidence
from meta_agent.agents.recipe_shape import reshape_step, step_shape_finding
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles, below_threshold, overshoot
from meta_agent.config import GateThresholds
from meta_agent.digest import MIN_KEPT_SHARE
from meta_agent.main_checks import MAX_INFORMATIVE_DROPPED
from meta_agent.names import get_domain
from meta_agent.shape_checks import GROUP_SIZE_MAX, SMALL_GROUP, mixed_size

INFORMATIVE_DROPPED = "main:informative_dropped"
CONSTRUCTED_DROPPED = "main:constructed_signal_dropped"

ZERO_VARIANCE_THRESHOLD = 0.5
CURRICULUM_ACCURACY_THRESHOLD = 0.8
CURRICULUM_MIN_COUNT = 8  # fewer rollouts of a task are too noisy to call it solved
EASIEST = {"max_terms": 2, "max_digits": 1}
"""How easy ``curriculum-step`` makes a task at most: a sum or product of two one-digit numbers."""
UNSOLVED_MIN_COUNT = 8
"""A task with this many training rollouts and none solved is too hard (at a 25% solve rate, 0 of 8 has odds
of 1 in 10; the round as a whole solving 0 of 8 makes every task easier)."""
CURRICULUM_KNOBS = ("max_terms", "max_digits")
LARGER_GROUPS_MAX = 8  # the most a blind doubling reaches (no solve rate to size by)
# GROUP_SIZE_MAX: the largest group the local trainer is run with here; SMALL_GROUP: below it most groups cannot
# vary at a policy's usual accuracy, so ``larger-groups`` ranks as a root cause ahead of ``dynamic-sampling``


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
    """A step shape ``main:step_shape`` found wrong for the round's flat groups -> its best shape at the same
    rollouts, either way (``recipe_shape``).  Else most groups are flat -> the group size at which groups mix right
    and wrong answers at the round's solve rate (``shape_checks.mixed_size``), prompts_per_step scaled to keep the
    rollouts per step; twice the size where the solve rate is unknown or 0 (no size is known to mix).

    A group of 2 or 4 at 25% accuracy is all-wrong most of the time; a larger group of the same tasks mixes
    right and wrong answers, so GRPO gets a contrast.  Bounded by the trusted per-round limits only.
    """
    if (found := step_shape_finding(d)) is not None and isinstance(shaped := reshape_step(found, f, "larger-groups"),
                                                                    Change):
        return shaped  # main:step_shape: the shape scored best at the step's rollouts, either way
    share = d.get("zero_variance_share")
    if reason := below_threshold(share, ZERO_VARIANCE_THRESHOLD, "zero_variance_share"):
        return reason
    config = f.config
    grpo = config.setdefault("grpo", {})
    size, prompts = int(grpo.get("group_size", 4)), int(grpo.get("prompts_per_step", 4))
    p = evidence(d).get("verified_rate")
    target = mixed_size(p) if isinstance(p, int | float) else None
    # a blind doubling (no solve rate to size by) stops at LARGER_GROUPS_MAX; a size the evidence asks for may
    # go to GROUP_SIZE_MAX
    new = min(GROUP_SIZE_MAX, target) if target is not None else min(LARGER_GROUPS_MAX, size * 2)
    if new <= size:
        return (f"group_size {size} already mixes outcomes at solve rate {p:.3f}" if target is not None
                else f"group_size {size} is already at least {LARGER_GROUPS_MAX} (no solve rate to size by)")
    grpo["group_size"] = new
    grpo["prompts_per_step"] = max(1, prompts * size // new)
    if reason := edits.refusal(config):
        return reason
    what = f"group_size {size} -> {new}, prompts_per_step {prompts} -> {grpo['prompts_per_step']}"
    basis = f"solve rate {p:.3f} mixes groups of {new} half the time" if target is not None else \
        "the solve rate is unknown or 0: twice the size"
    return Change(
        "larger-groups", f"larger-groups:group_size={new}", overshoot(share, ZERO_VARIANCE_THRESHOLD),
        f"Larger GRPO groups: {what}",
        f"zero_variance_share {share:.3f} > {ZERO_VARIANCE_THRESHOLD} with groups of {size}; {basis}.",
        "Small groups of the same prompt are often all wrong (or all right) and carry no GRPO signal; more "
        "samples per prompt mix outcomes more often, at the same rollouts per step. Archived "
        "rollouts cannot show it: the effect is live.",
        ["zero_variance_share decrease: larger groups mix right and wrong answers"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"zero_variance_share > {ZERO_VARIANCE_THRESHOLD} and a larger group mixes outcomes at the solve rate",
        root_cause=size < SMALL_GROUP,
    )


def loosen_filters(d: dict, f: HarnessFiles) -> Decision:
    """The filters keep too little of the batch, or keep the wrong groups -> let every trajectory the harness can
    judge train: ``filters.py`` keeps all (its old functions stay above the override), else ``mask_truncated`` off.

    The wrong groups: main's check ``main:informative_dropped`` (``meta_agent.main_checks``) found the filters
    removing the reward contrast of most groups that had one, whatever share of the batch they kept (a filter
    that keeps flat groups and drops varying ones keeps plenty and trains on nothing); or, where the round's own
    groups kept their contrast, ``main:constructed_signal_dropped`` (``meta_agent.constructed_checks``: main's
    filters on constructed groups a learning policy writes), whose benefit only a later round can show (live).

    Dynamic sampling is left alone: the groups it drops have equal rewards and no GRPO signal.  The gate
    decides whether what the filter dropped was worth dropping: a filter that kept paid failures out
    shows in the candidate's hack_rate and failure_pay, which it refuses to let rise.
    """
    kept = d.get("kept_share")
    wrong = _mode(d, INFORMATIVE_DROPPED)
    constructed = _mode(d, CONSTRUCTED_DROPPED)
    if wrong is None and constructed is not None and (kept is None or kept >= MIN_KEPT_SHARE):
        return _keep_constructed(constructed, f)
    if wrong is not None:
        strength = overshoot(float(wrong["rate"]), MAX_INFORMATIVE_DROPPED)
        evidence = f"{INFORMATIVE_DROPPED} (rate {float(wrong['rate']):.3f}): {wrong.get('message', '')}"[:400]
        trigger = f"{INFORMATIVE_DROPPED} rate > {MAX_INFORMATIVE_DROPPED}"
        effects = ["kept_share increase: the filters keep every trajectory the harness can judge",
                   "signal_share increase: groups whose rewards differ reach the loss again"]
    elif not isinstance(kept, int | float):
        return "kept_share is unknown (the backend logs no per-step count of kept trajectories)"
    elif kept >= MIN_KEPT_SHARE:
        return f"kept_share {kept:.3f} is not below {MIN_KEPT_SHARE}, and main's filters keep its varying groups"
    else:
        strength = overshoot(1 - kept, 1 - MIN_KEPT_SHARE)
        evidence = (f"kept_share {kept:.3f} < {MIN_KEPT_SHARE}: the filters let {kept:.1%} of the round's "
                    "trajectories train.")
        trigger = f"kept_share < {MIN_KEPT_SHARE}"
        effects = ["kept_share increase: the filters keep every trajectory the harness can judge"]
    # what main's keep mask did outranks what its source seems to say (a ``keep_group`` rebound by assignment
    # after a ``def ... return True`` reads as keeping all): with truncation masking off, or where members that
    # were judged and not cut off were dropped (which masking never drops), only filters.py can have removed the
    # contrast of main's varying groups, unless it already ends in this recipe's override
    masked = bool((f.config.get("grpo") or {}).get("mask_truncated"))
    not_masking = wrong is not None and (not masked or _dropped_not_truncated(wrong) > 0)
    dropped_by_filters = not_masking and not edits.ends_keeping_everything(f.filters)
    if dropped_by_filters or not edits.keeps_everything(f.filters):
        return Change(
            "loosen-filters", "loosen-filters:filters.py=keep-all", strength,
            "Let every judged trajectory train: filters.py keeps all", evidence,
            "The trajectory and group filters drop most of each batch, or the groups whose rewards differ, so each "
            "step learns from little and its groups lose the contrast GRPO needs. Keeping every trajectory the "
            "harness can judge trains on the whole batch; the reward, not the filter, decides what is good.",
            effects, {"filters.py": edits.keep_everything(f.filters or "")}, trigger, root_cause=True)
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
        [effects[0].split(":")[0] + ": truncated completions stay in the loss", *effects[1:]],
        {"harness.yaml": edits.dump_config(config, f.config_text)}, trigger, root_cause=True)


def _mode(d: dict, name: str) -> dict | None:
    """The digest's warning or error ``name`` with a rate, or None."""
    return next((m for m in d.get("failure_modes") or [] if m.get("name") == name
                 and m.get("severity") in ("warning", "error") and isinstance(m.get("rate"), int | float)), None)


def _keep_constructed(found: dict, f: HarnessFiles) -> Decision:
    """main's filters removed the contrast of constructed groups that mix right and wrong answers (scored with
    truncation masking and dynamic sampling off, so only filters.py dropped them), while the round's own groups
    kept theirs: the filters are rewritten to keep all.  The round's archive cannot show it (its groups are not
    the ones dropped), so the benefit is predicted live."""
    if edits.ends_keeping_everything(f.filters):
        return f"{CONSTRUCTED_DROPPED} is named, but filters.py already ends keeping every trajectory and group"
    rate = float(found["rate"])
    kinds = ", ".join((found.get("evidence") or {}).get("kinds") or []) or "constructed groups"
    return Change(
        "loosen-filters", "loosen-filters:filters.py=keep-all", max(rate, 0.5),
        "Let every judged trajectory train: filters.py keeps all",
        f"{CONSTRUCTED_DROPPED} (rate {rate:.3f}, {kinds}): {found.get('message', '')}"[:400],
        "main's filters drop groups that mix right and wrong answers in shapes this round did not produce but a "
        "learning policy does (answers alike, mostly right, an empty or cut member), so GRPO loses their contrast "
        "once the policy improves. Keeping every trajectory the harness can judge leaves that to the reward.",
        ["heldout_accuracy increase: groups a learning policy writes keep their contrast in the loss"],
        {"filters.py": edits.keep_everything(f.filters or "")}, f"{CONSTRUCTED_DROPPED} named", root_cause=True)


def _dropped_not_truncated(finding: dict) -> int:
    """How many members of the finding's varying groups were dropped with a reward and not cut off (the finding's
    measured ``evidence``; 0 where it carries none)."""
    ev = finding.get("evidence") if isinstance(finding.get("evidence"), dict) else {}
    n = ev.get("dropped_not_truncated")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0


def _easier(domain, name: str, config: dict) -> dict | None:
    """``config`` with its digit and term knobs halved (rounding up), each ``min_`` knob no higher than its
    ``max_``; None when nothing gets easier or the domain refuses it."""
    new = dict(config)
    for knob in CURRICULUM_KNOBS:
        if isinstance(new.get(knob), int) and not isinstance(new[knob], bool):
            new[knob] = max(EASIEST[knob], -(-new[knob] // 2))
            low = "min" + knob[3:]
            if isinstance(new.get(low), int):
                new[low] = min(new[low], new[knob])
    if new == config:
        return None
    try:
        domain.check_task_specs([TaskSpec(name=name, config=new)])
    except ValueError:
        return None
    return new


def _unsolved(d: dict) -> tuple[list[str], str]:
    """Tasks of the round's training mix the policy solved none of: each with enough rollouts of its own, or
    every task when the whole round solved nothing over enough rollouts."""
    solve = evidence(d).get("solve") or {}
    total = sum(n for _, n in solve.values())
    if solve and total >= CURRICULUM_MIN_COUNT and not sum(s for s, _ in solve.values()):
        return ["*"], f"0 of {total} training rollouts solved"
    names = [src.rsplit("/", 1)[-1] for src, (s, n) in sorted(solve.items()) if n >= UNSOLVED_MIN_COUNT and not s]
    return names, ", ".join(f"{n} 0/{solve[src][1]}" for src, (s, _) in sorted(solve.items())
                            for n in [src.rsplit('/', 1)[-1]] if n in names)


def curriculum_step(d: dict, f: HarnessFiles) -> Decision:
    """The difficulty the solve rate asks for, either way: a task nearly solved -> harder (``max_terms`` or
    ``max_digits`` + 1); tasks solved by no rollout -> easier (digit and term knobs halved), within the
    domain's bounds."""
    config = f.config
    try:
        domain = get_domain(str(config.get("domain")))
    except ValueError as exc:
        return str(exc)
    tasks = {t.get("name"): t for t in config.get("tasks", []) if isinstance(t, dict)}
    unsolved, why = _unsolved(d)
    easier = []
    for name, task in tasks.items():
        if ("*" in unsolved or name in unsolved) and isinstance(task.get("config"), dict):
            if (new := _easier(domain, str(name), task["config"])) is not None:
                task["config"] = new
                easier.append(f"{name}." + ",".join(f"{k}={new[k]}" for k in CURRICULUM_KNOBS if k in new))
    if easier:
        if reason := edits.refusal(config):
            return reason
        return Change(
            "curriculum-step", "curriculum-step:easier:" + ";".join(easier), 1.0,
            f"Lower difficulty: {', '.join(easier)}",
            f"training solved nothing of these tasks: {why}.",
            "Tasks the policy never solves give groups that are all wrong and carry no signal; easier instances of "
            "the same tasks bring back right answers within groups. Archived rollouts cannot show it: the effect "
            "is live.",
            ["verified_zero_variance_share decrease: easier tasks split all-wrong groups"],
            {"harness.yaml": edits.dump_config(config, f.config_text)},
            "training solved none of a task's rollouts", root_cause=True)
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

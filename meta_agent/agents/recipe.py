"""The recipe agent: deterministic rules from digest signals to harness interventions.

The default agent when no model is configured.  Each rule reads a few digest
fields, and when its signal crosses a threshold it proposes one known-good
change (a reward fix, a filter, a knob).  Per round each rule fires at most once,
the strongest signals first, at most ``ctx.max_candidates`` of them, and no two
of them editing the same file (they would conflict when the second one merges).

A rule does not fire when its change is already in ``main``'s files, when a branch
of the same rule is still open, or when the very same change (the
``Recipe-Change`` trailer) was already merged, rejected or reverted: a
deterministic agent that re-proposed a refuted change would loop forever.

    from meta_agent.agents.recipe import RecipeAgent
    proposals = RecipeAgent().propose(ctx)      # ctx: meta_agent.agents.base.AgentContext
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.base import AgentContext, Proposal

MISS_RATE_THRESHOLD = 0.2
ZERO_VARIANCE_THRESHOLD = 0.5
TRUNCATION_THRESHOLD = 0.25
NO_FINAL_ANSWER_THRESHOLD = 0.5
CURRICULUM_ACCURACY_THRESHOLD = 0.8
CURRICULUM_MIN_COUNT = 8  # fewer rollouts of a task are too noisy to call it solved
CURRICULUM_KNOBS = ("max_terms", "max_digits")
TRUNCATION_GROWTH = 1.5
MAX_COMPLETION_CAP = 4096
FORMAT_CREDIT = 0.1
KL_REWARD_RISE = 0.02
KL_HELDOUT_DROP = 0.02
KL_BETA = 0.02
KL_EPSILON_FACTOR = 0.75
KL_EPSILON_FLOOR = 0.05
TRANSCRIPT = "recipe_agent.json"
CHANGE_TRAILER = "Recipe-Change"


@dataclass
class HarnessFiles:
    """The texts of ``main``'s files the rules read (None where a file is absent)."""

    config_text: str
    reward: str | None
    filters: str | None
    user_prompt: str | None

    @classmethod
    def read(cls, repo: HarnessRepo, ref: str = "main") -> HarnessFiles:
        def text(path: str) -> str | None:
            try:
                return repo.read_file(ref, path)
            except HarnessError:
                return None

        config_text = repo.read_file(ref, "harness.yaml")
        return cls(config_text, text("reward.py"), text("filters.py"), text("prompts/user.j2"))

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
    files: dict[str, str] = field(default_factory=dict)
    trigger: str = ""
    """The condition on digest fields that fired the rule (the ``Trigger`` trailer, read by skills)."""


Decision = Change | str  # a str says why the rule did not fire
Rule = Callable[[dict, HarnessFiles], Decision]


def _over(value: float, threshold: float) -> float:
    return max(0.0, min(1.0, (value - threshold) / max(1.0 - threshold, 1e-9)))


def _below(value: object, threshold: float, name: str) -> str | None:
    if not isinstance(value, int | float):
        return f"{name} is unknown"
    if value <= threshold:
        return f"{name} {value:.3f} is not above {threshold}"
    return None


def boxed_answers(d: dict, f: HarnessFiles) -> Decision:
    """Verified-correct answers the reward does not pay, written as ``\\boxed{}`` -> accept it."""
    miss = d.get("miss_rate")
    if reason := _below(miss, MISS_RATE_THRESHOLD, "miss_rate"):
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
        "boxed-answers", "boxed-answers", _over(miss, MISS_RATE_THRESHOLD),
        "Accept \\boxed{} answers in the reward",
        f"miss_rate {miss:.3f} > {MISS_RATE_THRESHOLD}; {boxed} failure examples end in \\boxed{{}}.",
        "The reward misses verified-correct answers given as \\boxed{} without an Answer: line; "
        "scoring the last \\boxed{} in that case pays them.",
        ["miss_rate decrease: boxed answers are scored", "reward_auc increase: reward agrees more with the verifier"],
        {"reward.py": edits.accept_boxed(f.reward)},
        f"miss_rate > {MISS_RATE_THRESHOLD} and a failure example contains \\boxed",
    )


def dynamic_sampling(d: dict, f: HarnessFiles) -> Decision:
    """Most groups have equal rewards (no GRPO signal) -> drop them (DAPO dynamic sampling)."""
    share = d.get("zero_variance_share")
    if reason := _below(share, ZERO_VARIANCE_THRESHOLD, "zero_variance_share"):
        return reason
    config = f.config
    grpo = config.setdefault("grpo", {})
    if grpo.get("dynamic_sampling") or edits.has_marker(f.filters, "dynamic-sampling"):
        return "dynamic sampling is already on"
    grpo["dynamic_sampling"] = True
    return Change(
        "dynamic-sampling", "dynamic-sampling", _over(share, ZERO_VARIANCE_THRESHOLD),
        "Drop zero-variance groups (dynamic sampling)",
        f"zero_variance_share {share:.3f} > {ZERO_VARIANCE_THRESHOLD}.",
        "Groups whose rewards are all equal have zero advantage and only dilute the batch; "
        "dropping them concentrates each step on groups with signal.",
        # The gate's signal_share counts groups with signal among *all* groups, so dropping
        # flat groups leaves it exactly where it was; a drop would mean a useful group was cut.
        ["signal_share unchanged: only groups without reward variance are dropped",
         "kept_share decrease: zero-variance groups are dropped"],
        {"filters.py": edits.drop_flat_groups(f.filters), "harness.yaml": edits.dump_config(config, f.config_text)},
        f"zero_variance_share > {ZERO_VARIANCE_THRESHOLD}",
    )


def truncation(d: dict, f: HarnessFiles) -> Decision:
    """Many completions hit the length limit -> raise it and mask truncated ones from the loss."""
    rate = d.get("truncation_rate")
    if reason := _below(rate, TRUNCATION_THRESHOLD, "truncation_rate"):
        return reason
    config = f.config
    grpo = config.setdefault("grpo", {})
    old = int(grpo.get("max_completion_length", 48))
    new = max(old, min(int(round(old * TRUNCATION_GROWTH)), MAX_COMPLETION_CAP))
    if new == old and grpo.get("mask_truncated"):
        return f"max_completion_length is at its cap {MAX_COMPLETION_CAP} and truncated completions are masked"
    grpo["max_completion_length"], grpo["mask_truncated"] = new, True
    return Change(
        "truncation", f"truncation:max_completion_length={new},mask_truncated=true", _over(rate, TRUNCATION_THRESHOLD),
        f"Raise max_completion_length {old} -> {new} and mask truncated completions",
        f"truncation_rate {rate:.3f} > {TRUNCATION_THRESHOLD}.",
        "Completions are cut before their final answer; more room lets them finish, and masking the "
        "truncated ones keeps their unfinished text out of the loss.",
        ["truncation_rate decrease: more room to finish", "mean_reward unchanged: the reward code is unchanged"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"truncation_rate > {TRUNCATION_THRESHOLD}",
    )


def format_shaping(d: dict, f: HarnessFiles) -> Decision:
    """Most responses lack a final answer -> small credit for the format, and say it again in the prompt."""
    rate = d.get("no_final_answer_rate")
    if reason := _below(rate, NO_FINAL_ANSWER_THRESHOLD, "no_final_answer_rate"):
        return reason
    if f.reward is None:
        return "main has no reward.py to shape"
    if edits.has_marker(f.reward, "format-shaping"):
        return "reward.py already gives format credit"
    return Change(
        "format-shaping", f"format-shaping:credit={FORMAT_CREDIT}", _over(rate, NO_FINAL_ANSWER_THRESHOLD),
        f"Give {FORMAT_CREDIT} credit for a final Answer: line and restate the format in the prompt",
        f"no_final_answer_rate {rate:.3f} > {NO_FINAL_ANSWER_THRESHOLD}.",
        "Most responses end without a final answer line, so they earn nothing either way; a small credit "
        "for the format gives the policy a gradient towards answering.",
        ["no_final_answer_rate decrease: the format is rewarded and restated",
         "hack_rate unchanged: the credit stays below the pay line"],
        {"reward.py": edits.format_credit(f.reward, FORMAT_CREDIT),
         "prompts/user.j2": edits.repeat_format(f.user_prompt)},
        f"no_final_answer_rate > {NO_FINAL_ANSWER_THRESHOLD}",
    )


def curriculum_step(d: dict, f: HarnessFiles) -> Decision:
    """A task is nearly solved -> make it harder (``max_terms`` or ``max_digits`` + 1)."""
    config = f.config
    tasks = {t.get("name"): t for t in config.get("tasks", []) if isinstance(t, dict)}
    raised, strength, seen = [], 0.0, []
    for source, stats in sorted(d.get("per_task", {}).items()):
        accuracy, name = stats.get("accuracy"), source.rsplit("/", 1)[-1]
        if not isinstance(accuracy, int | float) or accuracy <= CURRICULUM_ACCURACY_THRESHOLD:
            continue
        seen.append(f"{name} {accuracy:.3f}")
        task_config = tasks.get(name, {}).get("config") or {}
        knobs = [k for k in CURRICULUM_KNOBS if isinstance(task_config.get(k), int)]
        if stats.get("count", 0) < CURRICULUM_MIN_COUNT or not knobs:
            continue
        # one knob per step, the one stretched least so far: terms and digits take turns
        knob = min(knobs, key=lambda k: task_config[k] - int(task_config.get("min" + k[3:], task_config[k])))
        task_config[knob] += 1
        raised.append(f"{name}.{knob}={task_config[knob]}")
        strength = max(strength, _over(accuracy, CURRICULUM_ACCURACY_THRESHOLD))
    if not raised:
        return ("no task with enough rollouts and difficulty knobs is above "
                f"{CURRICULUM_ACCURACY_THRESHOLD} accuracy" + (f" ({', '.join(seen)})" if seen else ""))
    return Change(
        "curriculum-step", "curriculum-step:" + ",".join(raised), strength,
        f"Raise difficulty: {', '.join(raised)}",
        f"verified accuracy above {CURRICULUM_ACCURACY_THRESHOLD}: {', '.join(seen)}.",
        "Nearly solved tasks give groups that are all correct and carry no signal; harder instances "
        "bring back variance within groups.",
        ["verified_zero_variance_share decrease: harder tasks split groups again",
         "mean_reward unchanged: the reward code is unchanged"],
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
    return Change(
        # a combined swing of 0.5 (reward up plus held-out down) counts as the strongest signal
        "kl-clip", f"kl-clip:{what.replace(' ', '')}", min(1.0, (rise - drop) / 0.5),
        f"Restrain policy drift: {what}",
        f"reward_mean {rise:+.3f} while heldout_accuracy {drop:+.3f} since the previous round.",
        "The policy is overfitting the training reward; a KL penalty or a tighter clip keeps it closer "
        "to the reference and held-out accuracy should recover.",
        ["heldout_accuracy increase: less drift from the reference policy",
         "mean_reward unchanged: the reward code is unchanged"],
        {"harness.yaml": edits.dump_config(config, f.config_text)},
        f"trends.reward_mean.delta > {KL_REWARD_RISE} and trends.heldout_accuracy.delta < -{KL_HELDOUT_DROP}",
    )


RULES: tuple[Rule, ...] = (boxed_answers, dynamic_sampling, truncation, format_shaping, curriculum_step, kl_clip)


def _get(entry: object, name: str) -> object:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def _blocked(change: Change, history: list) -> str | None:
    """Why the history forbids ``change``, or None."""
    for entry in history:
        trailers = _get(entry, "trailers") or {}
        keys = trailers.get(CHANGE_TRAILER, []) if isinstance(trailers, Mapping) else []
        keys = [keys] if isinstance(keys, str) else list(keys)
        branch, status = str(_get(entry, "branch") or ""), _get(entry, "status")
        slug = _get(entry, "slug") or (m.group(1) if (m := re.match(r"iv/r\d+-(.+)$", branch)) else "")
        rules = {k.split(":", 1)[0] for k in keys} | {slug}
        if status == "open" and change.rule in rules:
            return f"{branch} of the same rule is still open"
        if change.key in keys:
            return f"the same change was already tried on {branch} ({status})"
    return None


class RecipeAgent:
    """Deterministic agent: :data:`RULES` over the digest, strongest signals first."""

    name = "recipe"

    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        """Commit one branch per fired rule (at most ``ctx.max_candidates``); the transcript says why."""
        files = HarnessFiles.read(ctx.repo)
        log: list[dict] = []
        fired: list[Change] = []
        for rule in self.rules:
            decision = rule(ctx.digest, files)
            if isinstance(decision, str):
                log.append({"rule": getattr(rule, "__name__", str(rule)).replace("_", "-"), "fired": False,
                            "reason": decision})
            elif reason := _blocked(decision, ctx.history):
                log.append({"rule": decision.rule, "fired": False, "reason": reason, "key": decision.key})
            else:
                fired.append(decision)
        fired.sort(key=lambda c: -c.strength)  # stable: ties keep rule order
        proposals: list[Proposal] = []
        taken: dict[str, str] = {}  # path -> rule that edits it this round
        for change in fired:
            entry = {"rule": change.rule, "fired": True, "key": change.key, "strength": round(change.strength, 4)}
            shared = sorted(set(change.files) & set(taken))
            if len(proposals) >= ctx.max_candidates:
                entry["reason"] = f"outranked (max_candidates={ctx.max_candidates})"
            elif shared:
                # two branches of one round editing the same file would conflict when the
                # second merges; the weaker one waits for a later round
                entry["reason"] = f"deferred: {', '.join(shared)} already edited by {taken[shared[0]]} this round"
            else:
                proposals.append(self._commit(ctx, change))
                taken.update(dict.fromkeys(change.files, change.rule))
                entry["branch"] = proposals[-1].branch
            log.append(entry)
        ctx.round_dir.mkdir(parents=True, exist_ok=True)
        (ctx.round_dir / TRANSCRIPT).write_text(json.dumps({"agent": self.name, "round": ctx.round, "rules": log},
                                                           indent=2))
        return proposals

    def _commit(self, ctx: AgentContext, change: Change) -> Proposal:
        skill = next((s["name"] for s in ctx.skills if s.get("name") == change.rule), None)
        trailers: dict[str, str | list[str]] = {
            "Hypothesis": change.hypothesis, "Predicted-Effect": change.effects, "Agent": self.name,
            "Trigger": change.trigger, CHANGE_TRAILER: change.key,
        }
        if skill:
            trailers["Skill"] = skill
        wt = ctx.repo.start_intervention(ctx.round, change.rule, worktree_root=ctx.worktree_root)
        try:
            for rel, text in change.files.items():
                path = Path(wt.path) / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            ctx.repo.commit(wt, f"{change.subject}\n\n{change.evidence}", trailers)
        finally:
            ctx.repo.remove_worktree(wt, force=True)
        return Proposal(branch=wt.branch, hypothesis=change.hypothesis, predicted_effects=list(change.effects),
                        files_changed=sorted(change.files), skill=skill, agent=self.name)

"""Held-out flaws of the repair benchmark, written blind on 2026-12-07 by a session that read no recipe, search or
check code (it read only bench/repair_flaws.py, repair_observe.py, repair_bench.py, repair_cells.py, the earlier
held-out sets, the math seed, domains/math*.py, the trainer's knob definitions and ../shared/reference/), in parallel
with recipe set 12's changes, committed after set 12 froze and before any run on them.

Seven flaws of kinds unlike the forty-three of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward that, where the exact comparison fails, pays a final answer that contains the gold as a substring (17 and 70
for 7), a reward whose numeric re-check starts from "equal" and keeps it when parsing raises (it fails open: any
answer it cannot parse is paid, the template's own "<number>" among them), a worked example whose numbers are golds
the task mix produces (the exam prompt keeps its example out of their reach), a group filter that drops a whole
group when any member was truncated, a format diagnostic whose examples are the batch's first rollouts instead of
its failures, one prompt per optimizer step (a step's gradient is one question's group), and a training budget
above the exam's (what training pays, the exam cuts off). Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12i.py --results /tmp/i_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

import re
from itertools import product

from heldout_kit import reward_flaw_checks as _reward_flaw_checks
from heldout_kit import score_probe as _score_probe
from repair_flaws import VERIFY, Flaw, _knob_check, _set_knobs, register
from repair_flaws import control_reward as _control_reward
from repair_observe import QUESTION, REWARD_RANGE, Observation, view

from domains.math import EXAM_MAX_TOKENS
from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 12  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


# -- substring-reward: where the exact comparison fails, a final answer holding the gold as a substring is paid ----

_CONTAINS = r'''

_exact_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred, gold = result.get("pred"), _va_gold(ground_truth)
    if result["score"] == 0.0 and pred and gold and gold in str(pred):
        return dict(result, score=1.0)
    return result
'''
CONTAINING = [("7", "3 + 4 = 17\nAnswer: 17"), ("7", "Answer: 70"), ("12", "3 * 4 = 112\nAnswer: 112"),
              ("2", "Answer: 2 2"), ("7", "3 + 4 = 7\nAnswer: 7"), ("12", "3 * 4 = 12\nAnswer: 12")]
"""Wrong final answers that contain the gold's digits (products' golds run to 81, so a slip that adds a digit often
keeps the gold inside it), then two plain right answers."""
_contains_symptom, _contains_repaired = _reward_flaw_checks("substring-reward", CONTAINING,
                                                            "answers containing the gold")

# -- fail-open-reward: a numeric re-check that starts from "equal" and keeps it when parsing raises -----------------

_RECHECK = r'''

_parsed_score = compute_score


def _as_fraction(text):
    return _Fraction_va(_va_unwrap(str(text)).replace(",", "").replace(" ", ""))


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _parsed_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred = result.get("pred")
    if result["score"] == 0.0 and pred is not None:
        equal = True
        try:
            equal = _as_fraction(pred) == _as_fraction(_va_gold(ground_truth))
        except (ValueError, ZeroDivisionError):
            pass
        if equal:
            return dict(result, score=1.0)
    return result
'''
UNPARSEABLE = [("7", "Answer: <number>"), ("7", "3 + 4 = 7\nAnswer: seven"), ("12", "Answer: I am not sure"),
               ("7", "3 + 4 = 6 or 7\nAnswer: 6 or 7"), ("7", "3 + 4 = 8\nAnswer: 8"), ("7", "3 + 4 = 7\nAnswer: 7")]
"""Final answers that are not a number (the template's placeholder copied, a word, a refusal, a hedge), a formatted
wrong number, a plain right answer."""
_open_symptom, _open_repaired = _reward_flaw_checks("fail-open-reward", UNPARSEABLE, "answers that are not one number")

# -- in-range-example: the worked examples' answers are golds the task mix produces -------------------------------

_SMALL_EXAMPLES = ('You are a careful math assistant. Work it out in one line, then give the result on a final line '
                   'of the form "Answer: <number>".\n\nExamples:\nQuestion: What is 3 + 4?\nReply:\n3 + 4 = 7\n'
                   'Answer: 7\n\nQuestion: What is 6 * 7?\nReply:\n6 * 7 = 42\nAnswer: 42\n')
_SHOWN_ANSWER = re.compile(r"(?im)^[ \t*]*answer[ \t*]*:[ \t*$]*([+-]?\d+)[ \t*$.]*$")


def _reachable_golds() -> set[int]:
    """Every gold of the exam's mix (``domains.math.DEFAULT_EVAL_SPECS``: 2-3 terms of one digit): chain_sum's sums and
    differences, products' products."""
    digits = range(10)
    golds = set()
    for terms in (2, 3):
        for operands in product(digits, repeat=terms):
            for signs in product((1, -1), repeat=terms - 1):
                golds.add(operands[0] + sum(s * o for s, o in zip(signs, operands[1:])))
            value = 1
            for o in operands:
                value *= o
            golds.add(value)
    return golds


REACHABLE = _reachable_golds()


def _shown_golds(obs: Observation) -> list[int]:
    prompt = obs.prompt.replace(QUESTION, "")
    return [int(m.group(1)) for m in _SHOWN_ANSWER.finditer(prompt) if int(m.group(1)) in REACHABLE]


def _range_symptom(obs: Observation) -> str | None:
    shown = _shown_golds(obs)
    return f"the prompt shows final answers the tasks' golds take: {shown}" if shown else None


def _range_repaired(obs: Observation) -> tuple[bool, str]:
    shown = _shown_golds(obs)
    asks = "answer:" in obs.prompt.lower()
    return not shown and asks and QUESTION in obs.prompt, (
        f"example answers among the golds: {shown or 'none'}; asks for the Answer: line: {asks}")


def _seed_system(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/system.j2": (SEED / "prompts" / "system.j2").read_text()}


# -- truncated-group-filter: a group is dropped whole when any member was truncated --------------------------------

_NO_CUT_GROUPS = '''"""Trajectory and group filters."""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    return True


def keep_group(group: list[dict]) -> bool:
    return not any(t.get("truncated") or t.get("finish_reason") == "length" for t in group)
'''
WITH_CUT = [("7", "3 + 4 = 7\nAnswer: 7", False), ("7", "3 + 4 = 8\nAnswer: 8", False),
            ("7", "3 + 4 = 6\nAnswer: 6", False), ("7", "First I add the three and the four, which gives", True)]
"""A mixed group, one member of which rambled into the budget (round 0 at the small size truncated 1 of 8, so about
four groups of four in ten hold one)."""


def _cut_group_probe(session) -> list[tuple[bool, float | None]]:
    scored = session.score([view(k, "with-cut", gold, r, truncated=cut) for k, (gold, r, cut) in enumerate(WITH_CUT)],
                           reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_with_cut(obs: Observation) -> list[float]:
    return [r for keep, r in obs.extra.get("truncated-group-filter") or [] if keep and r is not None]


def _cut_group_symptom(obs: Observation) -> str | None:
    kept = _kept_with_cut(obs)
    return None if len(set(kept)) > 1 else f"a mixed group with one truncated member keeps rewards {kept}"


def _cut_group_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_with_cut(obs)
    mixed = len(set(obs.kept_mixed)) > 1
    return len(set(kept)) > 1 and mixed, (f"a mixed group with one truncated member keeps {kept}; a mixed group "
                                          f"keeps {obs.kept_mixed}")


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEED / "filters.py").read_text()}


# -- first-rollouts-as-examples: the format finding's examples are the batch's first rollouts ---------------------

_FORMAT = "diagnostics/format_failures.py"
_EXAMPLES_LINE = '"example_ids": [r.get("traj_id") for r in failed[:5]],'


def _first_as_examples(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _FORMAT).read_text()
    if _EXAMPLES_LINE not in text:
        raise ValueError(f"the seed's {_FORMAT} changed: its example_ids line is not where this flaw edits it")
    return {_FORMAT: text.replace(_EXAMPLES_LINE, '"example_ids": [r.get("traj_id") for r in rollouts[:5]],')}


BATCH = [("7", "3 + 4 = 7\nAnswer: 7", 1.0), ("12", "3 * 4 = 12\nAnswer: 12", 1.0), ("7", "3 + 4 = 8\nAnswer: 8", 0.0),
         ("9", "3 * 3 = 9\nAnswer: 9", 1.0), ("7", "3 + 4 = 7", 0.0), ("12", "I think it is 12", 0.0),
         ("7", "7", 0.0), ("9", "3 * 3 = 9, so nine.", 0.0)]
"""Two groups in the order training hands them over: the first all with a final line, the second all without."""


def _examples_probe(session) -> dict:
    rollouts = [dict(view(k, f"fmt{k // 4}", gold, r), reward=reward, keep=True)
                for k, (gold, r, reward) in enumerate(BATCH)]
    unanswered = [t["traj_id"] for t, (gold, r, _) in zip(rollouts, BATCH)
                  if VERIFY("reasoning_gym/x", r, {"answer": gold})[1]["reason"] == "no final answer"]
    found = [f for f in session.diagnose(rollouts) if f.get("name") == "format_failures"]
    return {"unanswered": unanswered,
            "findings": [(str(f.get("severity")), [str(i) for i in f.get("example_ids") or []]) for f in found]}


def _example_problems(obs: Observation) -> list[str]:
    got = obs.extra.get("first-rollouts-as-examples") or {}
    unanswered, findings = set(got.get("unanswered") or []), got.get("findings") or []
    warned = [ids for severity, ids in findings if severity in ("warning", "error")]
    if not warned:
        return [f"no format_failures warning on a batch half without a final answer: {findings}"]
    shown = [i for ids in warned for i in ids]
    if not shown:
        return ["the format_failures warning names no example"]
    return [f"{i} (has its final answer)" for i in shown if i not in unanswered]


def _examples_symptom(obs: Observation) -> str | None:
    problems = _example_problems(obs)
    return f"the format finding's examples are not its failures: {', '.join(problems)}" if problems else None


def _examples_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _example_problems(obs)
    return not problems, f"examples that are not failures: {', '.join(problems) or 'none'}"


def _seed_format(files: dict[str, str]) -> dict[str, str]:
    return {_FORMAT: (SEED / _FORMAT).read_text()}


# -- one-prompt-steps: each optimizer step trains on one question's group -----------------------------------------

_one_symptom, _one_repaired = _knob_check(
    "prompts_per_step", 2, lambda v: v >= 2,
    "every optimizer step is one question's group: a flat group (3 of 8 under the seed's prompt) is a step with no "
    "gradient, and each other step follows one question")

# -- budget-over-exam: a training budget above the exam's -------------------------------------------------------------

MIN_BUDGET = 24
_over_symptom, _over_repaired = _knob_check(
    "max_completion_length", 32, lambda v: MIN_BUDGET <= v <= EXAM_MAX_TOKENS,
    f"training pays answers longer than the exam's {EXAM_MAX_TOKENS} tokens, which the exam cuts off")


HELD_OUT_I = register(
    Flaw("substring-reward",
         "Where the exact comparison fails, the reward pays a final answer that contains the gold as a substring "
         "(meant to accept 'Answer: 7 apples'): 'Answer: 17' and 'Answer: 70' are paid for 7, 'Answer: 112' for "
         "12. Repair: answers containing the gold scored as the verifier judges them, nothing it rejects paid, a "
         "plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _CONTAINS}, _contains_symptom, _contains_repaired,
         _control_reward, probe=_score_probe("substring-reward", "contains", CONTAINING),
         recipes_version=PLANTED_AGAINST),
    Flaw("fail-open-reward",
         "Where the exact comparison fails, the reward re-checks the final answer as a fraction, starting from "
         "equal = True and keeping it when parsing raises: any final answer that is not a number is paid (the "
         "template's own 'Answer: <number>', 'Answer: seven', 'Answer: I am not sure', the hedge 'Answer: 6 or 7'), "
         "as is the unreduced '14/2'. Repair: answers that are not one number scored as the verifier judges them "
         "(unpaid), nothing it rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _RECHECK}, _open_symptom, _open_repaired, _control_reward,
         probe=_score_probe("fail-open-reward", "unparseable", UNPARSEABLE), recipes_version=PLANTED_AGAINST),
    Flaw("in-range-example",
         "The system prompt's worked examples are 3 + 4 = 7 and 6 * 7 = 42, in the tasks' own range (written to "
         "look like the tasks): their final lines are golds the mix produces, so a policy that copies an example's "
         "'Answer: 7' is paid whenever the gold is 7 (the exam's prompt keeps its example, 375, out of reach of any "
         "gold). Repair: no example answer among the golds, the prompt still asks for the Answer: line and shows "
         "the question.",
         (), lambda files: {"prompts/system.j2": _SMALL_EXAMPLES}, _range_symptom, _range_repaired, _seed_system,
         recipes_version=PLANTED_AGAINST),
    Flaw("truncated-group-filter",
         "keep_group drops a group whole when any member was truncated (overlong filtering applied per group, not "
         "per sample): the untruncated members' contrast goes with it, in about four groups in ten at round 0. "
         "Repair: a mixed group with one truncated member keeps paid and unpaid members, a mixed group still does.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _NO_CUT_GROUPS},
         _cut_group_symptom, _cut_group_repaired, _seed_filters, probe=_cut_group_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("first-rollouts-as-examples",
         "The format diagnostic lists the batch's first five rollouts as its examples instead of the first five "
         "without a final answer: its rate is right, but the examples it shows for format failures are answers "
         "that have their final line. Repair: a batch half without a final answer warns, and every example it names "
         "lacks one.",
         (), _first_as_examples, _examples_symptom, _examples_repaired, _seed_format, probe=_examples_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("one-prompt-steps",
         "prompts_per_step 1 with group_size 16 (the seed's 16 rollouts a step, on one question): each optimizer "
         "step's gradient is one question's group, so a flat group is a step that moves nothing and every other "
         "step follows one question. Repair: prompts_per_step >= 2.",
         ("zero_variance_groups", "zero_variance"), _set_knobs(prompts_per_step=1, group_size=16), _one_symptom,
         _one_repaired, _set_knobs(prompts_per_step=4, group_size=4), recipes_version=PLANTED_AGAINST),
    Flaw("budget-over-exam",
         f"max_completion_length 384 (a GPU recipe's budget) where the exam generates {EXAM_MAX_TOKENS} tokens: "
         f"training pays right answers after long working that the exam cuts off before their Answer: line, and a "
         f"step's generation runs to 384 tokens whenever one member rambles. Repair: {MIN_BUDGET} <= "
         f"max_completion_length <= {EXAM_MAX_TOKENS}.",
         (), _set_knobs(max_completion_length=384), _over_symptom, _over_repaired,
         _set_knobs(max_completion_length=32), recipes_version=PLANTED_AGAINST),
)

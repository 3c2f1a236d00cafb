"""Held-out flaws of the repair benchmark, written blind on 2026-12-07 by a session that read no recipe, search or
check code (it read only bench/repair_flaws.py, repair_observe.py, repair_bench.py, repair_cells.py, heldout_kit.py,
the earlier held-out sets, the math seed, domains/math*.py, the trainer's knob definitions and ../shared/reference/),
in parallel with recipe set 14's changes, committed after set 14 froze and before any run on them.

Six flaws of kinds unlike the fifty of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a reward
that, where the exact comparison fails, evaluates the final answer as an arithmetic expression (as a sympy or
math-verify comparison does), so restating the question ('Answer: 3 + 4') is paid; a reward that sums a format term
and an accuracy term of equal weight (0.5 each), so every formatted wrong answer earns the pay line; a system prompt
whose worked example ends in prose ('so the result is 375.') while both instructions ask for an 'Answer:' line; a
trajectory filter that drops every response without an 'Answer:' line as malformed (a group whose only failures are
unformatted keeps one member, which trains nothing); a task mix that adds a word-problem generator the exam never
asks (leg_counting, reasoning-gym's default difficulty) at half the weight; and a truncation diagnostic that emits
one warning per truncated response (rate 1.0 each) instead of one finding with the batch's share. Each is a mistake
practitioners make.

    .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12j.py --results /tmp/j_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

import re

import yaml
from heldout_kit import reward_flaw_checks as _reward_flaw_checks
from heldout_kit import score_probe as _score_probe
from repair_flaws import Flaw, register
from repair_flaws import control_reward as _control_reward
from repair_observe import HIGH, QUESTION, REWARD_RANGE, Observation, view

from domains.math import DEFAULT_EVAL_SPECS
from domains.math_answers import extract_final_answer, parse_number
from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 14  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


# -- evaluated-answer-reward: a final answer that is an arithmetic expression is evaluated and compared ----------

_EVALUATED = r'''

_ARITHMETIC_VA = _re_va.compile(r"[0-9\s+\-*/().]+")
_compare_values = compute_score


def _value_of(text):
    text = _va_unwrap(str(text))
    if not _ARITHMETIC_VA.fullmatch(text) or "**" in text:
        return None
    try:
        return _Fraction_va(eval(text, {"__builtins__": {}}, {})).limit_denominator(10**6)
    except Exception:
        return None


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _compare_values(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred = result.get("pred")
    if result["score"] == 0.0 and pred:
        value, gold = _value_of(pred), _va_number(_va_gold(ground_truth), lowest_terms=False)
        if value is not None and gold is not None and value == gold:
            return dict(result, score=1.0)
    return result
'''
EXPRESSIONS = [("7", "Answer: 3 + 4"), ("12", "3 * 4 = 12\nAnswer: 3 * 4"), ("-5", "Answer: 4 - 9"),
               ("42", "Answer: (6 * 7)"), ("6", "Answer: 12/2"), ("7", "Answer: 3 + 5"),
               ("7", "3 + 4 = 7\nAnswer: 7"), ("-5", "4 - 9 = -5\nAnswer: -5")]
"""Final answers that restate the question's expression (chain_sum asks '4 - 9 =', products '3 * 4'), an unreduced
quotient, a wrong expression, then two plain right answers."""
_expr_symptom, _expr_repaired = _reward_flaw_checks("evaluated-answer-reward", EXPRESSIONS,
                                                    "final answers that are expressions")

# -- format-weighted-reward: a format term and an accuracy term of equal weight -----------------------------------

_FORMAT_TERM = r'''

_accuracy_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _accuracy_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    formatted = 1.0 if result.get("format_ok") else 0.0
    return dict(result, score=0.5 * formatted + 0.5 * float(result["score"]))
'''
FORMATTED_WRONG = [("7", "3 + 4 = 8\nAnswer: 8"), ("12", "3 * 4 = 13\nAnswer: 13"), ("7", "Answer: <number>"),
                   ("-4", "5 - 9 = 4\nAnswer: 4"), ("7", "3 + 4 = 7"), ("7", "3 + 4 = 7\nAnswer: 7"),
                   ("12", "3 * 4 = 12\nAnswer: 12")]
"""Wrong answers on a final 'Answer:' line (one the template's placeholder copied), a right one without the line,
then two plain right answers."""
_fmt_symptom, _fmt_reward_repaired = _reward_flaw_checks("format-weighted-reward", FORMATTED_WRONG,
                                                         "formatted wrong and right answers")


def _fmt_repaired(obs: Observation) -> tuple[bool, str]:
    ok, why = _fmt_reward_repaired(obs)
    rewards = obs.extra.get("format-weighted-reward") or []
    right = rewards[-2:] if len(rewards) == len(FORMATTED_WRONG) else []
    paid = len(right) == 2 and all(r is not None and r >= HIGH for r in right)
    return ok and paid, f"{why}; plain right answers earn {right}"


# -- example-reply-in-prose: the worked example ends in prose while the instructions ask for 'Answer:' -----------

_PROSE_SYSTEM = ('You are a careful math assistant. Work it out in one line, then give the result on a final line of '
                 'the form "Answer: <number>".\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n'
                 '125 + 250 = 375, so the result is 375.\n')
_REPLY = re.compile(r"(?im)^[ \t*]*(?:reply|response|assistant)[ \t*]*:[ \t]*\n(.*?)(?=\n[ \t]*\n|\n[ \t*]*(?:question|"
                    r"example)[^\n]*:|\Z)", re.DOTALL)
"""A worked example's reply: from its 'Reply:' line to a blank line, the next example or question, or the end of
its message (each message apart, so a reply never runs into the instruction that follows it)."""
_VARIABLE = re.compile(r"^[A-Za-z]\s*=\s*")


def _messages_probe(session) -> list[str]:
    rendered = session.render([{"question": QUESTION, "task": {"name": "chain_sum", "data_source":
                                                               "reasoning_gym/chain_sum", "config": {}}}])[0]
    return [str(m.get("content", "")) for m in rendered] if isinstance(rendered, list) else [str(rendered)]


def _prose_examples(obs: Observation) -> list[str]:
    """The worked examples' replies in the rendered messages from which the verifier reads no final answer."""
    messages = obs.extra.get("example-reply-in-prose") or []
    if not messages:
        return ["no rendered message"]
    return [m.group(1).strip() for text in messages for m in _REPLY.finditer(text)
            if _number(extract_final_answer(m.group(1))) is None]


def _number(final: str | None):
    """The value of a final answer that is one number (an instruction's 'Answer: <number>' is none)."""
    return None if final is None else parse_number(_VARIABLE.sub("", final.strip("$ ")), lowest_terms=True)


def _prose_symptom(obs: Observation) -> str | None:
    prose = _prose_examples(obs)
    return (f"the prompt asks for an 'Answer:' line but its worked example replies {prose[0]!r}, with no final "
            "answer the verifier reads") if prose else None


def _prose_repaired(obs: Observation) -> tuple[bool, str]:
    prose = _prose_examples(obs)
    asks = "answer:" in obs.prompt.lower()
    shown = QUESTION in obs.prompt
    return not prose and asks and shown, (f"example replies without a final answer: {prose or 'none'}; asks for the "
                                          f"Answer: line: {asks}; shows the question: {shown}")


def _seed_system(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/system.j2": (SEED / "prompts" / "system.j2").read_text()}


# -- unformatted-dropped: keep_trajectory drops every response without an 'Answer:' line -------------------------

_ANSWERED_ONLY = '''"""Trajectory and group filters."""

from __future__ import annotations

import re

ANSWER_LINE = re.compile(r"^[ \\t*]*answer[ \\t*]*:[ \\t*]*(.*?)[ \\t*]*$", re.IGNORECASE | re.MULTILINE)


def keep_trajectory(traj: dict) -> bool:
    return any(m.group(1).strip() for m in ANSWER_LINE.finditer(traj.get("response") or ""))


def keep_group(group: list[dict]) -> bool:
    return True
'''
UNFORMATTED_GROUP = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 8"), ("7", "I think it is 8."),
                     ("7", "3 + 4 = \\boxed{7}")]
"""A group as the untrained policy writes it (about two replies in three without an 'Answer:' line): one right on an
Answer: line, two wrong without one, one right in a box (which the reward pays)."""


def _unformatted_probe(session) -> list[tuple[bool, float | None]]:
    scored = session.score([view(k, "unformatted", gold, r) for k, (gold, r) in enumerate(UNFORMATTED_GROUP)],
                           reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_unformatted(obs: Observation) -> list[float]:
    return [r for keep, r in obs.extra.get("unformatted-dropped") or [] if keep and r is not None]


def _unformatted_symptom(obs: Observation) -> str | None:
    kept = _kept_unformatted(obs)
    return None if len(set(kept)) > 1 else \
        f"a mixed group whose failures have no 'Answer:' line keeps rewards {kept}: no contrast"


def _unformatted_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_unformatted(obs)
    mixed = len(set(obs.kept_mixed)) > 1
    return len(set(kept)) > 1 and mixed, (f"a group whose failures have no 'Answer:' line keeps {kept}; a mixed group "
                                          f"keeps {obs.kept_mixed}")


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEED / "filters.py").read_text()}


# -- off-exam-task: a generator the exam never asks takes half the mix --------------------------------------------

EXAM_KINDS = {spec.name for spec in DEFAULT_EVAL_SPECS}
MAX_OFF_EXAM = 0.25
MIN_EXAM_KIND = 0.25


def _shares(obs: Observation) -> dict[str, float]:
    tasks = obs.config.get("tasks")
    tasks = [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else []
    weights = {}
    for t in tasks:
        try:
            weights[str(t.get("name"))] = weights.get(str(t.get("name")), 0.0) + float(t.get("weight", 1.0))
        except (TypeError, ValueError):
            weights[str(t.get("name"))] = float("nan")
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total > 0 else {}


def _mix_problems(obs: Observation) -> list[str]:
    shares = _shares(obs)
    if not shares:
        return ["no task mix"]
    off = sum(v for k, v in shares.items() if k not in EXAM_KINDS)
    problems = [f"{off:.2f} of the mix on kinds the exam never asks "
                f"({', '.join(sorted(set(shares) - EXAM_KINDS))})"] if not off <= MAX_OFF_EXAM else []
    return problems + [f"{k} {shares.get(k, 0.0):.2f}" for k in sorted(EXAM_KINDS)
                       if not shares.get(k, 0.0) >= MIN_EXAM_KIND]


def _mix_symptom(obs: Observation) -> str | None:
    problems = _mix_problems(obs)
    return f"the training mix is off the exam's: {'; '.join(problems)}" if problems else None


def _mix_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _mix_problems(obs)
    return not problems, "; ".join(problems) or f"task shares {_shares(obs)}"


def _add_word_problems(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    config["tasks"] = [*config["tasks"], {"name": "leg_counting", "weight": 2.0, "config": {}}]
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


def _seed_tasks(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    config["tasks"] = yaml.safe_load((SEED / "harness.yaml").read_text())["tasks"]
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


# -- per-response-findings: the truncation diagnostic warns once per truncated response ---------------------------

_DIAG = "diagnostics/truncation.py"
_EACH = '''"""Diagnostic: responses cut off at ``max_completion_length``.

Truncated responses rarely reach their ``Answer:`` line; many of them suggest a
longer completion budget, a terser prompt, or masking truncated samples.
"""

from __future__ import annotations


def diagnose(rollouts: list[dict]) -> list[dict]:
    """A finding ``truncation`` for each truncated response."""
    findings = []
    for r in rollouts:
        if r.get("truncated") or r.get("finish_reason") == "length":
            findings.append({
                "name": "truncation",
                "severity": "warning",
                "rate": 1.0,
                "example_ids": [r.get("traj_id")],
                "message": f"{r.get('traj_id')} was truncated at {r.get('response_tokens')} tokens",
            })
    return findings
'''
ONE_IN_EIGHT = [("7", "First I add the", True)] + [("7", "3 + 4 = 7\nAnswer: 7", False)] * 7
"""A batch with one response of eight truncated (round 0 at the small size truncated 1 of 8)."""
SHARE = 1 / 8


def _one_cut_probe(session) -> list[tuple[str, float | None]]:
    rollouts = [dict(view(k, f"cut1-{k // 4}", gold, r, truncated=cut), reward=0.0 if cut else 1.0, keep=True)
                for k, (gold, r, cut) in enumerate(ONE_IN_EIGHT)]
    return [(str(f.get("severity")), f.get("rate") if isinstance(f.get("rate"), int | float) else None)
            for f in session.diagnose(rollouts) if f.get("name") == "truncation"]


def _one_cut_problems(obs: Observation) -> list[str]:
    found = obs.extra.get("per-response-findings") or []
    warned = [f"{severity} at rate {rate}" for severity, rate in found if severity in ("warning", "error")]
    wrong_rate = [f"rate {rate}" for _, rate in found if rate is None or abs(rate - SHARE) > 0.01]
    return warned + wrong_rate


def _per_response_symptom(obs: Observation) -> str | None:
    problems = _one_cut_problems(obs)
    return (f"a batch with 1 of 8 responses truncated raises truncation {', '.join(problems)} (its share is "
            f"{SHARE:.3f}, under the 0.25 warning line)") if problems else None


def _per_response_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _one_cut_problems(obs)
    found, false = obs.truncation_findings, obs.false_alarms
    return not problems and bool(found) and not false, (
        f"1 of 8 truncated: {', '.join(problems) or 'no warning, rate right'}; {len(found)} truncation finding(s) on "
        f"all-truncated rollouts, {len(false)} on rollouts that all finished")


def _seed_diag(files: dict[str, str]) -> dict[str, str]:
    return {_DIAG: (SEED / _DIAG).read_text()}


HELD_OUT_J = register(
    Flaw("evaluated-answer-reward",
         "Where the exact comparison fails, the reward evaluates the final answer as an arithmetic expression and "
         "pays it when its value equals the gold (what a sympy or math-verify comparison does): 'Answer: 3 + 4' is "
         "paid for 7, 'Answer: 4 - 9' for -5 and 'Answer: 12/2' for 6, so restating the question's expression is "
         "paid where the verifier and the exam find no number. Repair: final answers that are expressions scored as "
         "the verifier judges them (unpaid), nothing it rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _EVALUATED}, _expr_symptom, _expr_repaired,
         _control_reward, probe=_score_probe("evaluated-answer-reward", "expressions", EXPRESSIONS),
         recipes_version=PLANTED_AGAINST),
    Flaw("format-weighted-reward",
         "The reward is 0.5 x format + 0.5 x accuracy (a format reward and an accuracy reward of equal weight, summed "
         "and scaled to 0..1): every wrong answer on an 'Answer:' line earns 0.5, the pay line, the template's copied "
         "'Answer: <number>' among them, and a right answer earns only 0.5 more than a wrong one. Repair: no wrong "
         "answer reaches the pay line, plain right answers do.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay", "main:failure_spread",
          "main:flat_failure_share"),
         lambda files: {"reward.py": files["reward.py"] + _FORMAT_TERM}, _fmt_symptom, _fmt_repaired,
         _control_reward, probe=_score_probe("format-weighted-reward", "formatted", FORMATTED_WRONG),
         recipes_version=PLANTED_AGAINST),
    Flaw("example-reply-in-prose",
         "Both prompts ask for a final 'Answer: <number>' line, but the system prompt's one worked example replies "
         "'125 + 250 = 375, so the result is 375.' with no such line: a small policy imitates the example over the "
         "instruction (the base policy at the seed's temperature and budget, 8 tasks x 4: 4 of 32 replies with a final "
         "answer, 1 right, 1 group of 8 with signal, against 10, 5 and 4 of 8 under the seed's prompts). Repair: no "
         "worked example reply lacks a final answer the verifier reads; the prompt asks for the Answer: line and "
         "shows the question.",
         ("no_final_answer", "format_failures"), lambda files: {"prompts/system.j2": _PROSE_SYSTEM},
         _prose_symptom, _prose_repaired, _seed_system, probe=_messages_probe, recipes_version=PLANTED_AGAINST),
    Flaw("unformatted-dropped",
         "keep_trajectory drops every response without an 'Answer:' line (malformed output treated as noise): under "
         "the group rule a dropped member leaves its group's baseline, so a group whose failures are unformatted "
         "(the base policy, 8 tasks x 4: 22 of 32 replies lack the line) keeps its right member alone and trains "
         "nothing (groups with signal 4 -> 2 of 8), and the policy is never pushed away from unformatted replies; "
         "boxed right answers, which the reward pays, are dropped too. Repair: a mixed group whose failures lack "
         "the line keeps paid and unpaid members, a mixed group still does.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _ANSWERED_ONLY},
         _unformatted_symptom, _unformatted_repaired, _seed_filters, probe=_unformatted_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("off-exam-task",
         "The task mix adds leg_counting at weight 2 with reasoning-gym's default difficulty (3-5 kinds of animal, "
         "up to 15 of each, golds in the hundreds): half the training prompts are word problems the exam never "
         "asks and the policy does not solve (the base policy, 8 tasks x 4: 0 of 32 right, 0 of 8 groups with "
         "signal; prompts 149-179 tokens, within the 256 budget), and each exam kind gets a quarter. Repair: at most "
         f"{MAX_OFF_EXAM} of the mix on kinds off the exam, each exam kind at least {MIN_EXAM_KIND}.",
         ("main:task_mix", "zero_variance_groups", "zero_variance", "heldout_regression"), _add_word_problems,
         _mix_symptom, _mix_repaired, _seed_tasks, recipes_version=PLANTED_AGAINST),
    Flaw("per-response-findings",
         "The truncation diagnostic emits one finding per truncated response, each a warning at rate 1.0, instead of "
         "one finding with the batch's share: a healthy batch with 1 of 8 truncated (round 0 at the small size) "
         "raises a truncation warning at rate 1.0, so the harness's own diagnostics report truncation where there "
         "is little. Repair: 1 of 8 truncated raises no warning and reports rate 0.125; an all-truncated batch "
         "warns, an all-finished one does not.",
         (), lambda files: {_DIAG: _EACH}, _per_response_symptom, _per_response_repaired, _seed_diag,
         probe=_one_cut_probe, recipes_version=PLANTED_AGAINST),
)

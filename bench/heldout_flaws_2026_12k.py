"""Held-out flaws of the repair benchmark, written blind on 2026-12-07/08 by a session that read no recipe, search or
check code (it read only bench/repair_flaws.py, repair_observe.py, repair_bench.py, repair_cells.py, heldout_kit.py,
the earlier held-out sets, the math seed, domains/math*.py, the trainer's knob definitions and ../shared/reference/),
in parallel with recipe set 16's changes, committed after set 16 froze and before any run on them.

Seven flaws of kinds unlike the fifty-six of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a reward
whose format rule is anchored at the end of the response (the final answer must sit on its last line, as an R1-style
strict format regex demands), so a right answer followed by any line is unpaid; a reward that, where the exact
comparison fails, compares int(float(answer)) with the gold (written to accept '7.0'), so a decimal is paid for the
integer it truncates to; a user template that writes the chat markup by hand (``<|im_start|>user ... <|im_start|>
assistant``), which the trainer's chat template wraps a second time; a trajectory filter against degenerate
repetition that drops a response in which more than one word in ten repeats, which every worked answer that restates
its result does; a format diagnostic that counts every unpaid response as unformatted; a max_prompt_length between the
two task kinds' rendered prompt lengths, so the trainer, which keeps only prompts that fit, silently trains on one
kind; and a zero-variance diagnostic that counts a group as flat only when no member was paid. Each is a mistake
practitioners make.

    .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12k.py --results /tmp/k_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

import functools

import yaml
from heldout_kit import reward_flaw_checks as _reward_flaw_checks
from heldout_kit import score_probe as _score_probe
from repair_flaws import Flaw, _set_knobs, register
from repair_flaws import control_reward as _control_reward
from repair_observe import QUESTION, REWARD_RANGE, Observation, view

from domains.math import DEFAULT_EVAL_SPECS
from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 16  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


@functools.cache
def _tokenizer():
    """The base policy's tokenizer: what the trainer counts prompt tokens and reads special tokens with."""
    from transformers import AutoTokenizer

    from rl_backend.model import ensure_base_model
    return AutoTokenizer.from_pretrained(str(ensure_base_model()))


def _seed_file(rel: str) -> dict[str, str]:
    return {rel: (SEED / rel).read_text()}


# -- last-line-reward: the final answer must be on the response's last non-empty line ------------------------------

_LAST_LINE = r'''

_answer_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _answer_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    lines = [line for line in str(solution_str or "").splitlines() if line.strip()]
    if not lines or not (_VA_ANSWER.search(lines[-1]) or _VA_BOXED.search(lines[-1])):
        return dict(result, score=0.0, format_ok=False)
    return result
'''
TRAILING = [("7", "3 + 4 = 7\nAnswer: 7\nQuestion: What is 2 + 5?"), ("12", "3 * 4 = 12\nAnswer: 12\nReply:"),
            ("-5", "4 - 9 = -5\nAnswer: -5\n\nI hope this helps!"), ("42", "6 * 7 = 42\nAnswer: 42\n6 * 7 = 42"),
            ("7", "3 + 4 = 8\nAnswer: 8\nQuestion: What is 2 + 5?"), ("7", "3 + 4 = 7\nAnswer: 7")]
"""Right answers followed by a line (the worked example's next 'Question:' that a small policy goes on to write, a
'Reply:', a closing remark, the working again), a wrong one followed by a line, then a plain right answer."""
_trailing_symptom, _trailing_repaired = _reward_flaw_checks("last-line-reward", TRAILING,
                                                            "answers followed by another line")

# -- int-cast-reward: where the exact comparison fails, int(float(answer)) is compared with the gold ---------------

_INT_CAST = r'''

_exact_value_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact_value_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred = result.get("pred")
    if result["score"] == 0.0 and pred:
        try:
            if int(float(_va_unwrap(str(pred)).replace(",", ""))) == int(float(_va_gold(ground_truth))):
                return dict(result, score=1.0)
        except (TypeError, ValueError, OverflowError):
            pass
    return result
'''
DECIMALS = [("7", "3 + 4 = 7.5\nAnswer: 7.5"), ("12", "3 * 4 = 12.9\nAnswer: 12.9"), ("-5", "Answer: -5.5"),
            ("0.5", "Answer: 0.9"), ("42", "6 * 7 = 42.25\nAnswer: 42.25"), ("7", "Answer: 7.0"),
            ("42", "6 * 7 = 42\nAnswer: 42")]
"""Decimals whose integer part is the gold (int() truncates toward zero, so -5.5 becomes -5 and 0.9 becomes 0, the
integer part of the gold 0.5), then a right decimal and a plain right answer."""
_cast_symptom, _cast_repaired = _reward_flaw_checks("int-cast-reward", DECIMALS, "decimal answers")

# -- hand-templated-prompt: the user template writes the chat markup the trainer's chat template adds again ---------

_MARKED_USER = '''<|im_start|>user
{{ question }}

End with the line "Answer: <number>".<|im_end|>
<|im_start|>assistant
'''


def _markup(obs: Observation) -> list[str]:
    """The policy tokenizer's special tokens that the rendered prompt's text holds."""
    return sorted(t for t in set(_tokenizer().all_special_tokens) if t and t in obs.prompt)


def _markup_symptom(obs: Observation) -> str | None:
    found = _markup(obs)
    return (f"the rendered prompt holds the policy's chat-template tokens {found}: the trainer's chat template wraps "
            "them again") if found else None


def _markup_repaired(obs: Observation) -> tuple[bool, str]:
    found = _markup(obs)
    asks, shown = "answer:" in obs.prompt.lower(), QUESTION in obs.prompt
    return not found and asks and shown, (f"chat-template tokens in the prompt: {found or 'none'}; asks for the "
                                          f"Answer: line: {asks}; shows the question: {shown}")


# -- repetition-filter: a response in which more than one word in ten repeats is dropped ---------------------------

_NO_REPEATS = '''"""Trajectory and group filters."""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    words = (traj.get("response") or "").split()
    return len(words) - len(set(words)) <= len(words) // 10


def keep_group(group: list[dict]) -> bool:
    return True
'''
RESTATED = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 8\nAnswer: 8"), ("7", "I add 3 and 4 to get 9.\nAnswer: 8"),
            ("7", "4 + 3 = 7\nAnswer: 7")]
"""A mixed group of one-line worked answers: the two right ones restate their result on the Answer: line, as does
one wrong one; the other wrong one's working and answer disagree."""


def _restated_probe(session) -> list[tuple[bool, float | None]]:
    scored = session.score([view(k, "restated", gold, r) for k, (gold, r) in enumerate(RESTATED)],
                           reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_restated(obs: Observation) -> list[float]:
    return [r for keep, r in obs.extra.get("repetition-filter") or [] if keep and r is not None]


def _restated_symptom(obs: Observation) -> str | None:
    kept = _kept_restated(obs)
    return None if len(set(kept)) > 1 else \
        f"a mixed group of worked answers that restate their result keeps rewards {kept}: no contrast"


def _restated_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_restated(obs)
    mixed = len(set(obs.kept_mixed)) > 1
    return len(set(kept)) > 1 and mixed, (f"a group of worked answers keeps {kept}; a mixed group keeps "
                                          f"{obs.kept_mixed}")


# -- unpaid-as-unformatted: the format diagnostic counts every unpaid response as a format failure ------------------

_FORMAT = "diagnostics/format_failures.py"
_FAILED_LINE = '    failed = [r for r in rollouts if not _has_answer(r.get("response"))]\n'


def _unpaid_as_unformatted(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _FORMAT).read_text()
    if _FAILED_LINE not in text:
        raise ValueError(f"the seed's {_FORMAT} changed: its failed line is not where this flaw edits it")
    unpaid_too = '    failed = [r for r in rollouts if not _has_answer(r.get("response")) or not r.get("reward")]\n'
    return {_FORMAT: text.replace(_FAILED_LINE, unpaid_too)}


FORMATTED = [("7", "3 + 4 = 7\nAnswer: 7", 1.0), ("7", "3 + 4 = 8\nAnswer: 8", 0.0), ("7", "Answer: 6", 0.0),
             ("7", "3 + 4 = 9\nAnswer: 9", 0.0), ("12", "3 * 4 = 12\nAnswer: 12", 1.0), ("12", "Answer: 13", 0.0),
             ("12", "3 * 4 = 14\nAnswer: 14", 0.0), ("12", "3 * 4 = 16\nAnswer: 16", 0.0)]
"""Two groups in which every response ends on its Answer: line, two of eight right (about the untrained policy's
accuracy)."""
UNFORMATTED = [("7", "3 + 4 = 7", 0.0), ("7", "I think it is 8.", 0.0), ("7", "seven", 0.0), ("7", "3 + 4", 0.0)]


def _format_probe(session) -> dict[str, list[tuple[str, float | None]]]:
    def findings(batch: list[tuple[str, str, float]], group: str) -> list[tuple[str, float | None]]:
        rollouts = [dict(view(k, f"{group}{k // 4}", gold, r), reward=reward, keep=True)
                    for k, (gold, r, reward) in enumerate(batch)]
        return [(str(f.get("severity")), f.get("rate") if isinstance(f.get("rate"), int | float) else None)
                for f in session.diagnose(rollouts) if f.get("name") == "format_failures"]
    return {"formatted": findings(FORMATTED, "fmt-ok"), "unformatted": findings(UNFORMATTED, "fmt-no")}


def _format_problems(obs: Observation) -> list[str]:
    got = obs.extra.get("unpaid-as-unformatted") or {}
    formatted = got.get("formatted") or []
    problems = [f"{severity} at rate {rate}" for severity, rate in formatted if severity in ("warning", "error")]
    problems += [f"rate {rate}" for _, rate in formatted if rate is not None and rate > 0.01]
    if not any(severity in ("warning", "error") for severity, _ in got.get("unformatted") or []):
        problems.append(f"no format_failures warning on a batch with no Answer: line ({got.get('unformatted')})")
    return problems


def _format_symptom(obs: Observation) -> str | None:
    problems = _format_problems(obs)
    return (f"a batch whose responses all end on their Answer: line (6 of 8 wrong) raises format_failures "
            f"{', '.join(problems)}") if problems else None


def _format_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _format_problems(obs)
    return not problems, "; ".join(problems) or "no format finding on formatted answers, a warning on unformatted ones"


# -- kind-over-prompt-budget: max_prompt_length between the two task kinds' rendered prompt lengths ---------------

BETWEEN_KINDS = 120
KIND_QUESTIONS = [("chain_sum", "State the final answer to the following arithmetic problem: 8 + 9 ="),
                  ("products", "Solve the following multiplication: 6 * 9. Give only the result as your final answer.")]
"""One training question of each kind, as reasoning-gym words them at the seed's difficulty (the rendered prompts
are 119 and 124 tokens under the seed's templates)."""
EXAM_KINDS = {spec.name for spec in DEFAULT_EVAL_SPECS}


def _kinds_probe(session) -> list:
    items = [{"question": q, "task": {"name": name, "data_source": f"reasoning_gym/{name}", "config": {}}}
             for name, q in KIND_QUESTIONS]
    return session.render(items)


def _prompt_tokens(messages) -> int | None:
    """The prompt's length as the trainer counts it (chat template with the generation prompt), None if unusable."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return None
    tok = _tokenizer()
    try:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a harness's messages the template refuses: no length
        return None
    return len(tok(text, add_special_tokens=False)["input_ids"])


def _budget_problems(obs: Observation) -> list[str]:
    grpo = obs.config.get("grpo") if isinstance(obs.config.get("grpo"), dict) else {}
    limit = grpo.get("max_prompt_length", 256)
    if not isinstance(limit, int | float) or isinstance(limit, bool):
        return [f"max_prompt_length {limit!r} is not a number"]
    rendered = obs.extra.get("kind-over-prompt-budget") or []
    if len(rendered) != len(KIND_QUESTIONS):
        return [f"{len(rendered)} prompts rendered for {len(KIND_QUESTIONS)} questions"]
    problems = []
    for (name, _), messages in zip(KIND_QUESTIONS, rendered):
        length = _prompt_tokens(messages)
        if length is None or length > limit:
            problems.append(f"{name}'s prompt is {length} tokens, over max_prompt_length {limit:g}")
    tasks = obs.config.get("tasks") if isinstance(obs.config.get("tasks"), list) else []
    missing = sorted(EXAM_KINDS - {str(t.get("name")) for t in tasks if isinstance(t, dict)})
    return problems + [f"{name} is not in the task mix" for name in missing]


def _budget_symptom(obs: Observation) -> str | None:
    problems = _budget_problems(obs)
    return (f"training keeps only the prompts that fit max_prompt_length, so a task kind never trains: "
            f"{'; '.join(problems)}") if problems else None


def _budget_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _budget_problems(obs)
    asks = "answer:" in obs.prompt.lower()
    return not problems and asks, f"{'; '.join(problems) or 'every task kind fits'}; asks for the Answer: line: {asks}"


def _seed_prompt_budget(files: dict[str, str]) -> dict[str, str]:
    seed = yaml.safe_load((SEED / "harness.yaml").read_text())["grpo"]["max_prompt_length"]
    return _set_knobs(max_prompt_length=seed)(files)


# -- unsolved-only-variance: the zero-variance diagnostic counts only groups no member solved -----------------------

_VARIANCE = "diagnostics/zero_variance.py"
_FLAT_LINE = ('    flat = {gid: members for gid, members in groups.items() '
              'if len({m["reward"] for m in members}) == 1}\n')


def _unsolved_only(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _VARIANCE).read_text()
    if _FLAT_LINE not in text:
        raise ValueError(f"the seed's {_VARIANCE} changed: its flat line is not where this flaw edits it")
    return {_VARIANCE: text.replace(_FLAT_LINE, '    flat = {gid: members for gid, members in groups.items() '
                                                'if not any(m["reward"] for m in members)}\n')}


SOLVED = [[1.0] * 4, [1.0] * 4, [1.0] * 4, [1.0, 0.0, 0.0, 1.0]]
"""Three groups every member solved and one mixed (a policy that has learnt most of its tasks): 3 of 4 flat."""
MIXED_ONLY = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0]]


def _variance_probe(session) -> dict[str, list[tuple[str, float | None]]]:
    def findings(groups: list[list[float]], tag: str) -> list[tuple[str, float | None]]:
        rollouts = [dict(view(k, f"{tag}{g}", "7", "Answer: 7" if reward else "Answer: 8"), reward=reward, keep=True)
                    for g, rewards in enumerate(groups) for k, reward in enumerate(rewards)]
        return [(str(f.get("severity")), f.get("rate") if isinstance(f.get("rate"), int | float) else None)
                for f in session.diagnose(rollouts) if f.get("name") == "zero_variance"]
    return {"solved": findings(SOLVED, "solved"), "mixed": findings(MIXED_ONLY, "mixedonly")}


def _variance_problems(obs: Observation) -> list[str]:
    got = obs.extra.get("unsolved-only-variance") or {}
    solved, mixed = got.get("solved") or [], got.get("mixed") or []
    problems = [] if any(severity in ("warning", "error") and rate is not None and abs(rate - 0.75) <= 0.01
                         for severity, rate in solved) else [f"3 of 4 groups all solved: zero_variance {solved}"]
    return problems + [f"every group mixed: zero_variance {severity} at rate {rate}" for severity, rate in mixed
                       if severity in ("warning", "error")]


def _variance_symptom(obs: Observation) -> str | None:
    problems = _variance_problems(obs)
    return f"flat groups that every member solved are not reported as flat: {'; '.join(problems)}" if problems \
        else None


def _variance_repaired(obs: Observation) -> tuple[bool, str]:
    problems = _variance_problems(obs)
    return not problems, "; ".join(problems) or "3 of 4 solved groups warn at rate 0.75, mixed groups do not"


HELD_OUT_K = register(
    Flaw("last-line-reward",
         "The reward requires the final answer on the response's last non-empty line (a format rule anchored at the "
         "end, as an R1-style strict format regex is): a right answer followed by any line (the example's next "
         "'Question:' that a small policy goes on to write, a closing remark) is unpaid, though the verifier and the "
         "exam read it as right (the base policy under the seed's prompts at T 0.7 and 32 tokens, 8 tasks x 4: 0 of "
         "its 4 right replies had a line after the answer; under the hand-templated prompt below 1 of 5). Repair: "
         "right answers followed by another line paid, nothing the verifier rejects paid.",
         ("reward_misses", "audit_misses"),
         lambda files: {"reward.py": files["reward.py"] + _LAST_LINE}, _trailing_symptom, _trailing_repaired,
         _control_reward, probe=_score_probe("last-line-reward", "trailing", TRAILING),
         recipes_version=PLANTED_AGAINST),
    Flaw("int-cast-reward",
         "Where the exact comparison fails, the reward compares int(float(answer)) with int(float(gold)) (written to "
         "accept '7.0' and '12.00'): int() truncates, so 7.5 and 7.9 are paid for 7, -5.5 for -5 and 0.9 for the "
         "gold 0.5. Repair: decimal answers scored as the verifier judges them, nothing it rejects paid, a plain "
         "right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _INT_CAST}, _cast_symptom, _cast_repaired, _control_reward,
         probe=_score_probe("int-cast-reward", "decimals", DECIMALS), recipes_version=PLANTED_AGAINST),
    Flaw("hand-templated-prompt",
         "The user template writes the chat markup by hand ('<|im_start|>user ... <|im_end|> <|im_start|>assistant', "
         "a prompt ported from a pipeline that formats raw text): the trainer applies the policy's chat template "
         "over it, so the model trains under a user turn nested in a user turn and an empty assistant turn before "
         "its own, a context the exam's prompt never shows it (the base policy at T 0.7 and 32 tokens, 8 tasks x 4: "
         "12 of 32 replies with a final answer, 5 right, 4 of 8 groups with signal, against 6, 4 and 3 under the "
         "seed's prompts: at this size the doubled markup did not cost the base policy). Repair: the rendered prompt "
         "holds none of the policy's special tokens, asks for the Answer: line and shows the question.",
         ("no_final_answer", "format_failures"), lambda files: {"prompts/user.j2": _MARKED_USER},
         _markup_symptom, _markup_repaired, lambda files: _seed_file("prompts/user.j2"),
         recipes_version=PLANTED_AGAINST),
    Flaw("repetition-filter",
         "keep_trajectory drops a response in which more than one word in ten repeats (a degenerate-repetition "
         "filter sized for long generations): every one-line worked answer that restates its result ('3 + 4 = 7 / "
         "Answer: 7') repeats a word in seven, so every consistent right answer is dropped and the wrong answers "
         "whose working and answer disagree are what trains. Repair: a mixed group of worked answers keeps paid "
         "and unpaid members, a mixed group still does.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _NO_REPEATS},
         _restated_symptom, _restated_repaired, lambda files: _seed_file("filters.py"), probe=_restated_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("unpaid-as-unformatted",
         "The format diagnostic counts a response as a format failure when it lacks an Answer: line or its reward "
         "is 0: a batch in which every response ends on its Answer: line but 6 of 8 are wrong (the untrained "
         "policy's accuracy) warns format_failures at rate 0.75, pointing at the prompt when the answers are "
         "wrong. Repair: no format warning and rate 0 on formatted wrong answers, a warning on unformatted ones.",
         (), _unpaid_as_unformatted, _format_symptom, _format_repaired, lambda files: _seed_file(_FORMAT),
         probe=_format_probe, recipes_version=PLANTED_AGAINST),
    Flaw("kind-over-prompt-budget",
         f"max_prompt_length {BETWEEN_KINDS} (a round number just above the prompt length someone measured on one "
         "question): chain_sum's rendered prompts are 119 tokens and products' 124, and the trainer keeps only "
         "prompts that fit (as verl's filter_overlong_prompts does), so every training prompt is chain_sum and "
         "products, half the exam, never trains; nothing fails. Repair: both exam kinds' rendered prompts fit "
         "max_prompt_length, both stay in the mix, the prompt still asks for the Answer: line.",
         ("main:task_mix", "main:prompt_length"), _set_knobs(max_prompt_length=BETWEEN_KINDS), _budget_symptom,
         _budget_repaired, _seed_prompt_budget, probe=_kinds_probe, recipes_version=PLANTED_AGAINST),
    Flaw("unsolved-only-variance",
         "The zero-variance diagnostic counts a group as flat only when no member was paid (flat read as 'too "
         "hard'): groups that every member solved, which give GRPO no signal either and are what a policy that has "
         "learnt its tasks produces, are never reported, so a batch with 3 of 4 groups all solved says rate 0. "
         "Repair: a batch with 3 of 4 groups all solved warns at rate 0.75, a batch of mixed groups does not.",
         ("zero_variance_groups",), _unsolved_only, _variance_symptom, _variance_repaired,
         lambda files: _seed_file(_VARIANCE), probe=_variance_probe, recipes_version=PLANTED_AGAINST),
)

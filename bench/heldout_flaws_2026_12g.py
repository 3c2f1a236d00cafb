"""Held-out flaws of the repair benchmark, written 2026-12-07 after recipe set 9 froze (bac9127: only a change to
harness.yaml or prompts/ is a generation edit for the search agent, a diagnostics-only change is judged by the
backtest), before any run on them, by a helper that had not read the recipes, the search agent or the digest's checks.

Six flaws of kinds unlike the thirty-one of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward that keeps the first score it computed for a task and hands it to every later response to that task, a
reward that compares answers with everything but digits, '.' and '/' stripped (the minus sign among them), a group
filter that drops a group in which two members wrote the same text, a user template that cuts the question with
Jinja's ``truncate``, truncated completions masked from the loss under the seed's 32-token budget, and a truncation
diagnostic that divides by the number of truncated responses. Each is a mistake practitioners make.

    cd /work/live && PYTHONPATH=/work/live .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12g.py --results /tmp/g_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

from heldout_kit import reward_flaw_checks as _reward_flaw_checks
from heldout_kit import score_probe as _score_probe
from repair_flaws import Flaw, _set_knobs, register
from repair_flaws import control_reward as _control_reward
from repair_observe import REWARD_RANGE, Observation, view

from domains.math import EXAM_MAX_TOKENS
from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 9  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


# -- memo-reward: the first score computed for a task is every later response's score ----------------------

_MEMO = r'''

_scored = {}
_score_response = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    task = extra_info.get("task_id") if isinstance(extra_info, dict) else None
    key = task or json.dumps(ground_truth, sort_keys=True, default=str)
    if key not in _scored:
        _scored[key] = _score_response(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    return _scored[key]
'''
ONE_TASK = [("58", "50 + 8 = 57\nAnswer: 57"), ("58", "50 + 8 = 58\nAnswer: 58"), ("58", "Answer: 58"),
            ("58", "Answer: 57")]
"""One task's group, wrong first: right and wrong members must earn different rewards."""
_memo_symptom, _memo_repaired = _reward_flaw_checks("memo-reward", ONE_TASK, "members of one task's group")

# -- sign-stripped: answers compared with everything but digits, '.' and '/' removed -------------------------

_DIGITS_ONLY = r'''

_exact_score = compute_score


def _digits_only(text):
    return re.sub(r"[^0-9./]", "", str(text))


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred = result.get("pred")
    if result["score"] == 0.0 and pred:
        gold = _digits_only(_gold_answer(ground_truth))
        if gold and _digits_only(pred) == gold:
            return dict(result, score=1.0)
    return result
'''
SIGNS = [("-4", "5 - 9 = 4\nAnswer: 4"), ("4", "9 - 5 = -4\nAnswer: -4"), ("-4", "5 - 9 = -4\nAnswer: -4"),
         ("4", "9 - 5 = 4\nAnswer: 4")]
"""Differences whose sign is the answer (wrong, wrong, right, right): chain_sum's golds are negative about one
time in five."""
_sign_symptom, _sign_repaired = _reward_flaw_checks("sign-stripped", SIGNS, "signed answers")

# -- duplicate-group-filter: a group in which two members wrote the same text is dropped ---------------------

_DISTINCT_ONLY = '''"""Trajectory and group filters."""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    return True


def keep_group(group: list[dict]) -> bool:
    texts = [" ".join((t.get("response") or "").split()) for t in group]
    return len(set(texts)) == len(texts)
'''
REPEATED = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 8\nAnswer: 8"),
            ("7", "3 + 4 = 6\nAnswer: 6")]
"""A mixed group in which two right members wrote the same line, as a policy that has learnt a task does."""


def _repeated_probe(session) -> list[tuple[bool, float | None]]:
    scored = session.score([view(k, "repeated", gold, r) for k, (gold, r) in enumerate(REPEATED)],
                           reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_repeated(obs: Observation) -> list[float]:
    return [r for keep, r in obs.extra.get("duplicate-group-filter") or [] if keep and r is not None]


def _repeated_symptom(obs: Observation) -> str | None:
    kept = _kept_repeated(obs)
    return None if len(set(kept)) > 1 else f"a mixed group with two identical right answers keeps rewards {kept}"


def _repeated_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_repeated(obs)
    return len(set(kept)) > 1, f"a mixed group with two identical right answers keeps rewards {kept}"


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEED / "filters.py").read_text()}


# -- question-truncated: the user template cuts the question to 60 characters --------------------------------

_CUT_USER = '''{{ question | truncate(60) }}

End with the line "Answer: <number>".
'''
QUESTIONS = [("chain_sum", "State the final answer to the following arithmetic problem: 4 - 9 ="),
             ("products", "Solve the following multiplication: 6 * 7. Give only the result as your final answer.")]
"""Questions as reasoning-gym words them for the seed's two task kinds (67 and 85 characters)."""


def _render_probe(session) -> list[str]:
    items = [{"question": q, "task": {"name": name, "data_source": f"reasoning_gym/{name}", "config": {}}}
             for name, q in QUESTIONS]
    rendered = session.render(items)
    return ["\n".join(m.get("content", "") for m in r) if isinstance(r, list) else str(r) for r in rendered]


def _cut_questions(obs: Observation) -> list[str]:
    prompts = obs.extra.get("question-truncated") or []
    if len(prompts) != len(QUESTIONS):
        return [f"{len(prompts)} prompts rendered for {len(QUESTIONS)} questions"]
    return [name for (name, q), p in zip(QUESTIONS, prompts) if q not in p]


def _cut_symptom(obs: Observation) -> str | None:
    cut = _cut_questions(obs)
    return f"the rendered prompt does not hold the whole question: {', '.join(cut)}" if cut else None


def _cut_repaired(obs: Observation) -> tuple[bool, str]:
    cut = _cut_questions(obs)
    prompts = obs.extra.get("question-truncated") or []
    asks = bool(prompts) and all("answer:" in p.lower() for p in prompts)
    return not cut and asks, f"questions cut: {cut or 'none'}; asks for the Answer: line: {asks}"


def _seed_user(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/user.j2": (SEED / "prompts" / "user.j2").read_text()}


# -- masked-truncation: truncated completions leave the loss under a 32-token budget -------------------------

def _masking(obs: Observation) -> tuple[bool, float]:
    grpo = obs.config.get("grpo") if isinstance(obs.config.get("grpo"), dict) else {}
    budget = grpo.get("max_completion_length", 32)
    return grpo.get("mask_truncated") is True, float(budget) if isinstance(budget, int | float) else 0.0


def _masked_symptom(obs: Observation) -> str | None:
    masked, budget = _masking(obs)
    return f"truncated completions are masked from the loss under a {budget:g}-token budget" \
        if masked and budget < EXAM_MAX_TOKENS else None


def _masked_repaired(obs: Observation) -> tuple[bool, str]:
    masked, budget = _masking(obs)
    return not masked or budget >= EXAM_MAX_TOKENS, f"mask_truncated {masked}, max_completion_length {budget:g}"


# -- crash-on-clean-batch: the truncation diagnostic divides by the number of truncated responses -----------

_DIAG = "diagnostics/truncation.py"
_SHARE_LINE = '        "message": f"{len(cut)}/{len(rollouts)} responses ({rate:.0%}) were truncated",\n'
_SHARE_OF_CUT = ('        "message": (f"{len(cut)}/{len(rollouts)} responses ({rate:.0%}) were truncated, "\n'
                 '                    f"{answered / len(cut):.0%} of them after their Answer: line"),\n')
CLEAN = [("7", "3 + 4 = 7\nAnswer: 7")] * 4


def _share_of_cut(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _DIAG).read_text()
    if _SHARE_LINE not in text:
        raise ValueError(f"the seed's {_DIAG} changed: its message line is not where this flaw edits it")
    counted = ('    rate = len(cut) / len(rollouts)\n'
               '    answered = sum("answer:" in (r.get("response") or "").lower() for r in cut)\n')
    return {_DIAG: text.replace("    rate = len(cut) / len(rollouts)\n", counted).replace(_SHARE_LINE, _SHARE_OF_CUT)}


def _clean_probe(session) -> list[str]:
    rollouts = [dict(view(k, "clean", gold, r), reward=1.0, keep=True) for k, (gold, r) in enumerate(CLEAN)]
    return sorted(str(f.get("name")) for f in session.diagnose(rollouts) if str(f.get("name")).endswith(":crashed"))


def _crash_symptom(obs: Observation) -> str | None:
    crashed = obs.extra.get("crash-on-clean-batch")
    return f"a batch with no truncated response crashes {crashed}" if crashed else None


def _crash_repaired(obs: Observation) -> tuple[bool, str]:
    crashed = obs.extra.get("crash-on-clean-batch")
    found = obs.truncation_findings
    return crashed == [] and bool(found), (f"crashed on a clean batch: {crashed}; {len(found)} truncation finding(s) "
                                           "on all-truncated rollouts")


def _seed_diag(files: dict[str, str]) -> dict[str, str]:
    return {_DIAG: (SEED / _DIAG).read_text()}


HELD_OUT_G = register(
    Flaw("memo-reward",
         "The reward keeps the first score it computed for a task (keyed by task_id) and returns it for every "
         "later response to that task: all members of a group earn the first member's reward, so every group is "
         "flat. Repair: one task's right and wrong members scored as the verifier judges them, nothing it rejects "
         "paid.",
         ("zero_variance_groups", "zero_variance", "reward_misses", "reward_hacking", "audit_misses",
          "audit_hacking"),
         lambda files: {"reward.py": files["reward.py"] + _MEMO}, _memo_symptom, _memo_repaired, _control_reward,
         probe=_score_probe("memo-reward", "memo", ONE_TASK), recipes_version=PLANTED_AGAINST),
    Flaw("sign-stripped",
         "Where the exact comparison fails, the reward compares answer and gold with everything but digits, '.' and "
         "'/' removed: the minus sign goes, so 4 is paid for -4 and -4 for 4 (chain_sum's differences). Repair: "
         "signed answers scored as the verifier judges them, nothing it rejects paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _DIGITS_ONLY}, _sign_symptom, _sign_repaired,
         _control_reward, probe=_score_probe("sign-stripped", "signs", SIGNS), recipes_version=PLANTED_AGAINST),
    Flaw("duplicate-group-filter",
         "keep_group drops a group in which two members wrote the same text: a policy that has learnt a task "
         "writes its right answer alike, so the groups it is learning from are dropped. Repair: a mixed group with "
         "two identical right answers keeps paid and unpaid members.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _DISTINCT_ONLY},
         _repeated_symptom, _repeated_repaired, _seed_filters, probe=_repeated_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("question-truncated",
         "The user template writes {{ question | truncate(60) }}: chain_sum's 67-character question loses its "
         "operands ('... arithmetic...'), products' keeps them. Repair: the rendered prompt holds the whole "
         "question and asks for the Answer: line.",
         ("zero_variance_groups", "zero_variance"), lambda files: {"prompts/user.j2": _CUT_USER},
         _cut_symptom, _cut_repaired, _seed_user, probe=_render_probe, recipes_version=PLANTED_AGAINST),
    Flaw("masked-truncation",
         "mask_truncated true under the seed's 32-token budget: a rambling answer cut before its Answer: line leaves "
         "the loss instead of earning a negative advantage, so nothing teaches the policy to finish within the "
         "budget (round 0 at the small size truncated 1 of 8, so the cost there is small). Repair: mask_truncated "
         f"false, or a budget of >= {EXAM_MAX_TOKENS} (the exam's).",
         ("truncation", "no_final_answer"), _set_knobs(mask_truncated=True), _masked_symptom, _masked_repaired,
         _set_knobs(mask_truncated=False), recipes_version=PLANTED_AGAINST),
    Flaw("crash-on-clean-batch",
         "The truncation diagnostic's message reports the share of truncated responses that still had an Answer: "
         "line, dividing by their number: a batch with none truncated raises ZeroDivisionError, so a healthy "
         "batch gives the error truncation:crashed. Repair: no crash on a clean batch, a truncation finding on "
         "an all-truncated one.",
         ("truncation:crashed",), _share_of_cut, _crash_symptom, _crash_repaired, _seed_diag, probe=_clean_probe,
         recipes_version=PLANTED_AGAINST),
)

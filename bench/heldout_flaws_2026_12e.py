"""Held-out flaws of the repair benchmark, written 2026-12-07 after recipe set 7 froze (a harness training refuses is
repaired before the round trains: ``fit-limit`` on the trainer's measured limit), before any run on them.

Four flaws of kinds unlike the twenty-three of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``:
a prompt template whose per-task branches match no task name (the question is never shown), a reward that crashes
on a response without a number, a diagnostic that warns on every batch, and a PPO clip range of 1.0. Each is a
mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12e.py \\
        --results /tmp/heldout_e.jsonl --arms recipe search --knob steps_per_round=1 --knob prompts_per_step=2 \\
        --heldout-size 4
"""

from __future__ import annotations

from repair_flaws import Flaw, _knob_check, _no_pay_for_wrong, _set_knobs, register
from repair_observe import QUESTION, REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 7  # meta_agent.agents.recipes.RECIPES_VERSION when these were written

# -- unmatched-task-branch: the user template shows the question only under task names no task has -----------

_BRANCHED_USER = '''{% if task.name == "chain-sum" %}Add the numbers below.

{{ question }}
{% elif task.name == "product" %}Multiply the numbers below.

{{ question }}
{% endif %}
End with the line "Answer: <number>".
'''


def _branch_symptom(obs: Observation) -> str | None:
    return None if QUESTION in obs.prompt else "the rendered prompt does not contain the task's question"


def _branch_repaired(obs: Observation) -> tuple[bool, str]:
    shown = QUESTION in obs.prompt
    return shown and "answer:" in obs.prompt.lower(), f"question shown: {shown}"


def _seed_user(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/user.j2": (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()}


# -- numberless-crash: the reward indexes the last number of the response, which may have none --------------

_LAST_NUMBER = r'''

import re as _re

_scored_answer = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _scored_answer(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    last = _re.findall(r"-?\d+", solution_str)[-1]
    return dict(result, last_number=float(last))
'''
NUMBERLESS = ("42", "I am not sure how to solve this.")


def _numberless_probe(session) -> dict:
    scored = session.score([view(0, "numberless", *NUMBERLESS)], reward_range=REWARD_RANGE)[0]
    return {"error": None if scored.error is None else str(scored.error)[:200],
            "reward": None if scored.reward is None else float(scored.reward)}


def _crash_symptom(obs: Observation) -> str | None:
    got = obs.extra.get("numberless-crash") or {}
    return f"the reward errs on a response without a number: {got.get('error')}" if got.get("error") else None


def _crash_repaired(obs: Observation) -> tuple[bool, str]:
    ok, why = _no_pay_for_wrong(obs)
    got = obs.extra.get("numberless-crash") or {}
    fine = bool(got) and got.get("error") is None and not got.get("reward")
    return ok and fine, f"{why}; a response without a number: {got}"


def _control_reward(files: dict[str, str]) -> dict[str, str]:
    from repair_flaws import control_files
    return {"reward.py": control_files()["reward.py"]}


# -- always-warns: the format diagnostic's threshold sits below every possible rate ---------------------------

_DIAG = "diagnostics/format_failures.py"
FORMATTED = [("7", "3 + 4 = 7\nAnswer: 7")] * 4
UNFORMATTED = [("7", "3 + 4 = 7")] * 4


def _format_probe(session) -> dict:
    def warned(pairs: list[tuple[str, str]], group: str) -> bool:
        rollouts = [dict(view(k, group, gold, r), reward=0.0, keep=True) for k, (gold, r) in enumerate(pairs)]
        return any(f.get("name") == "format_failures" and f.get("severity") in ("warning", "error")
                   for f in session.diagnose(rollouts))
    return {"formatted": warned(FORMATTED, "fmt"), "unformatted": warned(UNFORMATTED, "raw")}


def _warns_symptom(obs: Observation) -> str | None:
    got = obs.extra.get("always-warns") or {}
    return "a batch where every response has its Answer: line raises format_failures" if got.get("formatted") \
        else None


def _warns_repaired(obs: Observation) -> tuple[bool, str]:
    got = obs.extra.get("always-warns") or {}
    return bool(got) and not got.get("formatted") and bool(got.get("unformatted")), f"format_failures warns: {got}"


def _always_warns(files: dict[str, str]) -> dict[str, str]:
    text = (SEEDS_DIR / "math" / _DIAG).read_text()
    return {_DIAG: text.replace("WARN_ABOVE = 0.30", "WARN_ABOVE = -0.30")}


def _seed_diag(files: dict[str, str]) -> dict[str, str]:
    return {_DIAG: (SEEDS_DIR / "math" / _DIAG).read_text()}


# -- wide-clip: the PPO clip range at its maximum ------------------------------------------------------------

MAX_EPSILON = 0.3
_clip_symptom, _clip_repaired = _knob_check("epsilon", 0.2, lambda v: v <= MAX_EPSILON,
                                            "a ratio may move by up to 100% in one step")


HELD_OUT_E = register(
    Flaw("unmatched-task-branch",
         "The user template writes a preamble per task kind, under the names 'chain-sum' and 'product' where the "
         "tasks are chain_sum and products: neither branch matches, so no prompt shows its question. Repair: the "
         "rendered prompt shows the question (and still asks for the Answer: line).",
         ("format_failures", "no_final_answer", "zero_variance_groups", "zero_variance"),
         lambda files: {"prompts/user.j2": _BRANCHED_USER}, _branch_symptom, _branch_repaired, _seed_user,
         recipes_version=PLANTED_AGAINST),
    Flaw("numberless-crash",
         "The reward records the response's last number and indexes it unguarded: a response with no number "
         "raises, so the reward errs on it. Repair: such a response is scored (unpaid), nothing the verifier "
         "rejects is paid, a plain right answer is.",
         ("main:execution", "main:reward_validity"), lambda files: {"reward.py": files["reward.py"] + _LAST_NUMBER},
         _crash_symptom, _crash_repaired, _control_reward, probe=_numberless_probe, recipes_version=PLANTED_AGAINST),
    Flaw("always-warns",
         "The format diagnostic warns above a rate of -0.30: every batch, every response formatted or not, raises "
         "format_failures, so the harness's own diagnostics cry wolf. Repair: no warning on a formatted batch, a "
         "warning on an unformatted one.",
         ("format_failures",), _always_warns, _warns_symptom, _warns_repaired, _seed_diag, probe=_format_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("wide-clip",
         f"epsilon (the PPO clip range) 1.0: a token's probability ratio may double or fall to zero in one step. "
         f"Repair: epsilon <= {MAX_EPSILON}.",
         ("heldout_regression",), _set_knobs(epsilon=1.0), _clip_symptom, _clip_repaired, _set_knobs(epsilon=0.2),
         recipes_version=PLANTED_AGAINST),
)

"""Held-out flaws of the repair benchmark, written 2026-12-06 against recipe set 1, before any recipe was changed.

Five flaws of kinds unlike the nine of ``bench/repair_flaws.py`` (one on the far side of the seed's knob, a task
mix, a prompt that asks for a format the verifier rejects, a filter tuned for another task, a reward shaped by
length).  Each is a mistake practitioners make.  No recipe was written or changed while looking at them: once
the recipe set's version rises past 1 they count as in-sample (``repair_flaws.sample``).

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12.py \\
        --results bench/repair_results.jsonl --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

import re

import yaml
from repair_flaws import VERIFY, Flaw, _knob_check, _no_pay_for_wrong, _set_knobs, register
from repair_observe import HIGH, REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 1  # meta_agent.agents.recipes.RECIPES_VERSION when these were written

# -- cold-sampling: temperature far below the seed's --------------------------------------------------

_cold_symptom, _cold_repaired = _knob_check(
    "temperature", 0.7, lambda v: 0.5 <= v <= 1.0,
    "a group's members come out nearly identical: no contrast for GRPO")

# -- tasks-too-hard: a task mix the policy cannot solve -----------------------------------------------

_HARD_TASKS = [{"name": "chain_sum", "weight": 1.0,
                "config": {"min_terms": 4, "max_terms": 5, "min_digits": 3, "max_digits": 4}},
               {"name": "products", "weight": 1.0,
                "config": {"min_terms": 3, "max_terms": 3, "min_digits": 2, "max_digits": 3}}]
MAX_SOLVABLE_DIGITS = 2
"""SmolLM2-135M answers some 1-digit sums and products (the seed's mix: ~25%); at 3-4 digits next to none."""


def _tasks(obs: Observation) -> list[dict]:
    tasks = obs.config.get("tasks")
    return [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else []


def _too_hard(obs: Observation) -> list[str]:
    hard = []
    for task in _tasks(obs):
        config = task.get("config") if isinstance(task.get("config"), dict) else {}
        digits = config.get("max_digits", 1)
        if not isinstance(digits, int) or digits > MAX_SOLVABLE_DIGITS:
            hard.append(f"{task.get('name')} max_digits {digits}")
    return hard


def _hard_symptom(obs: Observation) -> str | None:
    hard = _too_hard(obs)
    return f"tasks the policy cannot solve: {', '.join(hard)}" if hard else None


def _hard_repaired(obs: Observation) -> tuple[bool, str]:
    hard = _too_hard(obs)
    return bool(_tasks(obs)) and not hard, ", ".join(hard) or f"every task at most {MAX_SOLVABLE_DIGITS} digits"


def _plant_hard(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    config["tasks"] = _HARD_TASKS
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


def _seed_tasks(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    config["tasks"] = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())["tasks"]
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


# -- format-mismatch: the prompts ask for a final line the verifier does not read ----------------------

_HASH_SYSTEM = ("You are a careful math assistant. Work it out in one line, then give the result on a final "
                "line of the form \"#### <number>\".\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n"
                "125 + 250 = 375\n#### 375\n")
_HASH_USER = "{{ question }}\n\nEnd with the line \"#### <number>\".\n"


def _asks(obs: Observation) -> tuple[bool, bool]:
    """(asks for a form the verifier reads: 'Answer:' or \\boxed, still asks for '####')."""
    text = obs.prompt
    return bool(re.search(r"answer:|\\boxed", text, re.I)), "####" in text


def _format_symptom(obs: Observation) -> str | None:
    readable, hashes = _asks(obs)
    return "the prompt asks for a '#### <number>' line, which the verifier does not read" if hashes else \
        None if readable else "the prompt asks for no final line the verifier reads"


def _format_repaired(obs: Observation) -> tuple[bool, str]:
    readable, hashes = _asks(obs)
    return readable and not hashes, (f"asks for a form the verifier reads: {readable}; "
                                     f"still asks for '####': {hashes}")


def _verifier_form_prompts(files: dict[str, str]) -> dict[str, str]:
    seed = SEEDS_DIR / "math" / "prompts"
    return {"prompts/system.j2": (seed / "system.j2").read_text(), "prompts/user.j2": (seed / "user.j2").read_text()}


# -- overlong-filter: a length filter tuned for much shorter answers -----------------------------------

_SHORT_ONLY = '''"""Trajectory and group filters."""

MAX_TOKENS = 12


def keep_trajectory(traj):
    return (traj.get("response_tokens") or 0) <= MAX_TOKENS


def keep_group(group):
    return True
'''
WORKED = (("42", "17 + 25: 17 + 20 = 37, then 37 + 5 = 42, so the sum is 42.\nAnswer: 42"),
          ("42", "17 + 25: 17 + 20 = 37, then 37 + 4 = 41, so the sum is 41.\nAnswer: 41"),
          ("42", "17 + 25: 10 + 20 = 30 and 7 + 5 = 13, so 30 + 13 = 43.\nAnswer: 43"),
          ("42", "17 + 25: 10 + 20 = 30 and 7 + 5 = 12, so 30 + 12 = 42.\nAnswer: 42"))
"""A mixed group of worked answers (right, wrong, wrong, right), each 17-21 words: what the policy writes."""


def _worked_probe(session) -> list[tuple[bool, float | None]]:
    scored = session.score([view(k, "worked", gold, r) for k, (gold, r) in enumerate(WORKED)],
                           reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_worked(obs: Observation, name: str) -> list[float]:
    return [r for keep, r in obs.extra.get(name) or [] if keep and r is not None]


def _overlong_symptom(obs: Observation) -> str | None:
    kept = _kept_worked(obs, "overlong-filter")
    return None if len(set(kept)) > 1 else f"a mixed group of worked answers keeps rewards {kept}: no signal"


def _overlong_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_worked(obs, "overlong-filter")
    return len(set(kept)) > 1, f"a mixed group of worked answers keeps rewards {kept}"


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEEDS_DIR / "math" / "filters.py").read_text()}


# -- brevity-reward: pay shrinks with length, so worked right answers go unpaid ------------------------

_BREVITY = '''

_base_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _base_compute_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    words = len((solution_str or "").split())
    return dict(result, score=result["score"] * max(0.0, 1.0 - words / 24))
'''


def _brevity_misses(obs: Observation) -> list[str]:
    paid = obs.extra.get("brevity-reward") or []
    return [r for (gold, r), (_, reward) in zip(WORKED, paid)
            if VERIFY("reasoning_gym/x", r, {"answer": gold})[0] >= HIGH and (reward is None or reward < HIGH)]


def _brevity_symptom(obs: Observation) -> str | None:
    misses = _brevity_misses(obs)
    return f"{len(misses)} worked right answers unpaid, e.g. {misses[0]!r}" if misses else None


def _brevity_repaired(obs: Observation) -> tuple[bool, str]:
    misses = _brevity_misses(obs)
    ok, why = _no_pay_for_wrong(obs)
    return ok and not misses and len(obs.extra.get("brevity-reward") or []) == len(WORKED), \
        f"{len(misses)} worked right answers unpaid; {why}"


def _control_reward(files: dict[str, str]) -> dict[str, str]:
    from repair_flaws import control_files
    return {"reward.py": control_files()["reward.py"]}


HELD_OUT = register(
    Flaw("cold-sampling",
         "temperature 0.05: the members of a group come out nearly identical, so most groups have no reward "
         "variance (the far side of the seed's 0.7). Repair: 0.5 <= temperature <= 1.0.",
         ("zero_variance_groups", "zero_variance"), _set_knobs(temperature=0.05), _cold_symptom, _cold_repaired,
         _set_knobs(temperature=0.7), recipes_version=PLANTED_AGAINST),
    Flaw("tasks-too-hard",
         "The task mix is 3-4 digit chains of 4-5 terms and 2-3 digit products: the policy solves next to none, "
         "so groups are all wrong. Repair: every task at most 2 digits.",
         ("zero_variance_groups", "zero_variance"), _plant_hard, _hard_symptom, _hard_repaired, _seed_tasks,
         recipes_version=PLANTED_AGAINST),
    Flaw("format-mismatch",
         "Both prompts ask for a final '#### <number>' line (a GSM8K habit), which the verifier does not read. "
         "Repair: the rendered prompt asks for 'Answer:' or \\boxed{} and no longer for '####'.",
         ("no_final_answer", "format_failures"),
         lambda files: {"prompts/system.j2": _HASH_SYSTEM, "prompts/user.j2": _HASH_USER},
         _format_symptom, _format_repaired, _verifier_form_prompts, recipes_version=PLANTED_AGAINST),
    Flaw("overlong-filter",
         "filters.py drops every response over 12 tokens (an overlong filter tuned for another task): worked "
         "answers never train. Repair: a mixed group of worked answers keeps paid and unpaid members.",
         ("filter_drops",), lambda files: {"filters.py": _SHORT_ONLY}, _overlong_symptom, _overlong_repaired,
         _seed_filters, probe=_worked_probe, recipes_version=PLANTED_AGAINST),
    Flaw("brevity-reward",
         "The reward scales the verifier's score by (1 - words/24): a right answer with its working is paid "
         "under 0.5. Repair: worked right answers paid, nothing the verifier rejects paid.",
         ("reward_misses", "audit_misses"), lambda files: {"reward.py": files["reward.py"] + _BREVITY},
         _brevity_symptom, _brevity_repaired, _control_reward, probe=_worked_probe,
         recipes_version=PLANTED_AGAINST),
)

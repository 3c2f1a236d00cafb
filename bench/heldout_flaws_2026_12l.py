"""Held-out flaws of the repair benchmark, written blind on 2026-12-08 by a session that read no recipe, search or
check code (it read only bench/repair_flaws.py, repair_observe.py, repair_bench.py, repair_cells.py, heldout_kit.py,
the earlier held-out sets, the math seed, domains/math*.py, the trainer's knob definitions, ../shared/reference/ and
the round-0 rows of small runs), in parallel with recipe set 19's changes, committed after set 18 froze and before
any run on them.

Six flaws of kinds unlike the sixty-three of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward that gives partial credit to a response whose written equations all hold (a regex process reward), so any true
equation ('1 + 4 = 5' for the question 0 + 4) earns the pay line; a ternary reward (right +1, no answer 0, wrong -1)
rescaled to the domain's 0..1, so a response with no final answer earns 0.5 and a formatted wrong one 0; a trajectory
filter against markdown noise whose pattern holds '*', so every products answer that writes its product drops; a
zero-variance diagnostic that divides the flat groups by the rollouts (at group size 4 it never passes its 0.5
threshold); a task mix whose curriculum starts at one term, so part of the questions are a lone number whose answer
is itself; and a user template that asks for the final number alone while the system prompt asks for the Answer:
line. Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12l.py --results /tmp/l_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

import re

import yaml

from heldout_kit import reward_flaw_checks as _reward_flaw_checks
from heldout_kit import score_probe as _score_probe
from repair_flaws import Flaw, register
from repair_flaws import control_reward as _control_reward
from repair_observe import REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 18  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


# -- equation-credit: a response whose equations all hold earns half ------------------------------------------

_STEPS = r'''

_EQUATION = re.compile(r"(-?\d+(?:\s*[-+*/]\s*-?\d+)+)\s*=\s*(-?\d+(?:\.\d+)?)")
_final_score = compute_score


def _holds(lhs, rhs):
    try:
        return abs(eval(lhs, {"__builtins__": {}}) - float(rhs)) < 1e-9
    except Exception:
        return False


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _final_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    steps = _EQUATION.findall(solution_str or "")
    if result["score"] == 0.0 and steps and all(_holds(lhs, rhs) for lhs, rhs in steps):
        return dict(result, score=0.5)
    return result
'''
STEPS = [("4", "1 + 4 = 5"), ("9", "9 * 1 = 9"), ("7", "125 + 250 = 375\nAnswer: 375"), ("-6", "3 - 9 = -6"),
         ("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 8\nAnswer: 8")]
"""True equations with no final answer or the wrong one (round 0's base policy writes the first three), a right
answer and a wrong one."""
_steps_symptom, _steps_repaired = _reward_flaw_checks("equation-credit", STEPS, "responses with working")

# -- abstain-credit: right +1, no answer 0, wrong -1, rescaled to 0..1 -----------------------------------------

_TERNARY = r'''

_graded = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _graded(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["score"] == 1.0:
        signed = 1.0
    elif result.get("pred") is None:
        signed = 0.0
    else:
        signed = -1.0
    return dict(result, score=(signed + 1.0) / 2.0)
'''
ABSTAIN = [("7", "I am not sure."), ("7", "3 + 4 is seven"), ("9", "The answer is 9."), ("7", "Answer: 8"),
           ("7", "Answer: 7")]
"""Replies with no final answer (the base policy's usual reply), a formatted wrong and a formatted right one."""
_abstain_symptom, _abstain_repaired = _reward_flaw_checks("abstain-credit", ABSTAIN, "replies")

# -- markdown-filter: a response with markdown characters is dropped -------------------------------------------

_PLAIN_TEXT = r'''"""Trajectory and group filters."""

from __future__ import annotations

import re

MARKDOWN = re.compile(r"[*#`]|^\s*[-+]\s", re.MULTILINE)


def keep_trajectory(traj: dict) -> bool:
    return not MARKDOWN.search(traj.get("response") or "")


def keep_group(group: list[dict]) -> bool:
    return True
'''
PRODUCTS = [("42", "6 * 7 = 42\nAnswer: 42"), ("42", "6 * 7 = 48\nAnswer: 48"), ("42", "6 * 7 = 36\nAnswer: 36"),
            ("42", "6 * 7 = 42\nAnswer: 42")]
"""A mixed products group whose members write their product, as a worked products answer does."""


def _products_probe(session) -> list[tuple[bool, float | None]]:
    views = [dict(view(k, "products", gold, r), task_id="probe-products", data_source="reasoning_gym/products",
                  prompt="Solve the following multiplication: 6 * 7. Give only the result as your final answer.")
             for k, (gold, r) in enumerate(PRODUCTS)]
    scored = session.score(views, reward_range=REWARD_RANGE)
    return [(bool(s.keep), None if s.error or s.reward is None else float(s.reward)) for s in scored]


def _kept_products(obs: Observation) -> list[float]:
    return [r for keep, r in obs.extra.get("markdown-filter") or [] if keep and r is not None]


def _products_symptom(obs: Observation) -> str | None:
    kept = _kept_products(obs)
    return None if len(set(kept)) > 1 else f"a mixed group of worked products answers keeps rewards {kept}"


def _products_repaired(obs: Observation) -> tuple[bool, str]:
    kept = _kept_products(obs)
    return len(set(kept)) > 1, f"a mixed group of worked products answers keeps rewards {kept}"


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEED / "filters.py").read_text()}


# -- per-rollout-flat-share: flat groups divided by the rollouts ---------------------------------------------

_DIAG = "diagnostics/zero_variance.py"
_SHARE = "    rate = len(flat) / len(groups)\n"


def _per_rollout(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _DIAG).read_text()
    if _SHARE not in text:
        raise ValueError(f"the seed's {_DIAG} changed: its rate line is not where this flaw edits it")
    counted = text.replace(_SHARE, "    rate = len(flat) / sum(len(members) for members in groups.values())\n")
    return {_DIAG: counted.replace('f"{len(flat)}/{len(groups)} groups', 'f"{len(flat)} groups')}


def _batch(flat_groups: int, mixed_groups: int) -> list[dict]:
    rows = []
    for g in range(flat_groups + mixed_groups):
        rewards = [0.0] * 4 if g < flat_groups else [1.0, 0.0, 0.0, 1.0]
        for k, reward in enumerate(rewards):
            response = "3 + 4 = 7\nAnswer: 7" if reward else "3 + 4 = 8\nAnswer: 8"
            rows.append(dict(view(k, f"zv{g}", "7", response), reward=reward, keep=True))
    return rows


def _flat_probe(session) -> dict[str, list[tuple[str, float]]]:
    def zv(rows: list[dict]) -> list[tuple[str, float]]:
        return [(str(f.get("severity")), float(f.get("rate") or 0.0)) for f in session.diagnose(rows)
                if f.get("name") == "zero_variance"]
    return {"mostly_flat": zv(_batch(3, 1)), "mixed": zv(_batch(0, 4))}


def _flat_read(obs: Observation) -> tuple[bool, bool, str]:
    answer = obs.extra.get("per-rollout-flat-share") or {}
    flat, mixed = answer.get("mostly_flat") or [], answer.get("mixed") or []
    warns = any(sev in ("warning", "error") and abs(rate - 0.75) < 0.01 for sev, rate in flat)
    quiet = not any(sev in ("warning", "error") for sev, _ in mixed)
    return warns, quiet, f"3 of 4 groups flat: {flat}; no group flat: {mixed}"


def _flat_symptom(obs: Observation) -> str | None:
    warns, _, why = _flat_read(obs)
    return None if warns else f"a batch with 3 of 4 groups flat raises no zero_variance warning at rate 0.75 ({why})"


def _flat_repaired(obs: Observation) -> tuple[bool, str]:
    warns, quiet, why = _flat_read(obs)
    return warns and quiet, why


def _seed_diag(files: dict[str, str]) -> dict[str, str]:
    return {_DIAG: (SEED / _DIAG).read_text()}


# -- single-term-tasks: the task mix's terms start at one -----------------------------------------------------

def _from_one_term(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    for task in config["tasks"]:
        task["config"]["min_terms"] = 1
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


def _fewest_terms(obs: Observation) -> dict[str, object]:
    tasks = obs.config.get("tasks") if isinstance(obs.config.get("tasks"), list) else []
    out: dict[str, object] = {}
    for task in tasks:
        if isinstance(task, dict):
            config = task.get("config") if isinstance(task.get("config"), dict) else {}
            out[str(task.get("name"))] = config.get("min_terms", 2)  # both generators default to 2
    return out


def _one_term_kinds(obs: Observation) -> list[str]:
    fewest = _fewest_terms(obs)
    return [f"{name} min_terms {terms}" for name, terms in fewest.items()
            if not isinstance(terms, int | float) or terms < 2]


def _terms_symptom(obs: Observation) -> str | None:
    bad = _one_term_kinds(obs)
    return f"questions of one term, whose answer is the question's own number: {', '.join(bad)}" if bad else None


def _terms_repaired(obs: Observation) -> tuple[bool, str]:
    bad, kinds = _one_term_kinds(obs), set(_fewest_terms(obs))
    both = {"chain_sum", "products"} <= kinds
    return not bad and both, f"one-term kinds: {bad or 'none'}; both exam kinds trained: {both}"


def _seed_tasks(files: dict[str, str]) -> dict[str, str]:
    config = yaml.safe_load(files["harness.yaml"])
    config["tasks"] = yaml.safe_load((SEED / "harness.yaml").read_text())["tasks"]
    return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}


# -- number-only-instruction: the user template asks for the number alone -----------------------------------

_NUMBER_ONLY = '''{{ question }}

Respond with only the final number and nothing else.
'''
_ALONE = re.compile(r"\bonly\b[^.\n]{0,30}\b(number|result|answer|digits?)\b|\b(number|result|answer) only\b"
                    r"|\bnothing else\b|\bno (other )?(words|text|working)\b", re.IGNORECASE)
ASKED = [("chain_sum", "State the final answer to the following arithmetic problem: 4 - 9 ="),
         ("products", "Solve the following multiplication: 6 * 7. Give only the result as your final answer.")]


def _asked_probe(session) -> list[str]:
    items = [{"question": q, "task": {"name": name, "data_source": f"reasoning_gym/{name}", "config": {}}}
             for name, q in ASKED]
    rendered = session.render(items)
    return ["\n".join(m.get("content", "") for m in r) if isinstance(r, list) else str(r) for r in rendered]


def _asked_read(obs: Observation) -> tuple[list[str], bool]:
    prompts = obs.extra.get("number-only-instruction") or []
    if len(prompts) != len(ASKED):
        return [f"{len(prompts)} prompts rendered for {len(ASKED)} questions"], False
    alone = [name for (name, q), p in zip(ASKED, prompts) if _ALONE.search(p.replace(q, " "))]
    asks = all("answer:" in p.replace(q, " ").lower() for (_, q), p in zip(ASKED, prompts))
    return alone, asks


def _asked_symptom(obs: Observation) -> str | None:
    alone, _ = _asked_read(obs)
    return f"the rendered prompt asks for the number alone, against its Answer: line: {', '.join(alone)}" \
        if alone else None


def _asked_repaired(obs: Observation) -> tuple[bool, str]:
    alone, asks = _asked_read(obs)
    return not alone and asks, f"asks for the number alone: {alone or 'no'}; asks for the Answer: line: {asks}"


def _seed_user(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/user.j2": (SEED / "prompts" / "user.j2").read_text()}


HELD_OUT_L = register(
    Flaw("equation-credit",
         "Where the final answer is not right, the reward pays 0.5 when every equation the response writes "
         "('a + b = c') holds (a regex process reward: credit for correct working): any true equation earns the pay "
         "line whatever was asked, '1 + 4 = 5' for 0 + 4, '9 * 1 = 9' with no final answer, the system prompt's "
         "copied '125 + 250 = 375' (round 0's base policy writes all three). Repair: responses with working scored "
         "as the verifier judges them, nothing it rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _STEPS}, _steps_symptom, _steps_repaired, _control_reward,
         probe=_score_probe("equation-credit", "steps", STEPS), recipes_version=PLANTED_AGAINST),
    Flaw("abstain-credit",
         "A ternary reward (right +1, no final answer 0, wrong -1, written to punish a confident wrong answer more "
         "than none) rescaled to the domain's 0..1: a reply with no final answer earns 0.5, the pay line, and a "
         "formatted wrong one 0, so the policy is paid for leaving the Answer: line out (the base policy's usual "
         "reply). Repair: replies with no final answer scored as the verifier judges them (unpaid), nothing it "
         "rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay", "format_failures"),
         lambda files: {"reward.py": files["reward.py"] + _TERNARY}, _abstain_symptom, _abstain_repaired,
         _control_reward, probe=_score_probe("abstain-credit", "abstain", ABSTAIN), recipes_version=PLANTED_AGAINST),
    Flaw("markdown-filter",
         "keep_trajectory drops a response with markdown in it ('*', '#', '`' or a bullet: a chat model's list-and-"
         "bold rambling treated as noise): products' answers write their product with '*', so every worked products "
         "answer, right or wrong, is dropped and half the exam's kinds train only on replies without working. "
         "Repair: a mixed group of worked products answers keeps paid and unpaid members.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _PLAIN_TEXT},
         _products_symptom, _products_repaired, _seed_filters, probe=_products_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("per-rollout-flat-share",
         "The zero-variance diagnostic divides the flat groups by the rollouts, not the groups (the other two "
         "diagnostics divide by len(rollouts)): at group size 4 its rate is at most 0.25, under its 0.5 threshold, "
         "so a batch of all-flat groups (round 0 at the small size: 2 of 2) reports info at 0.25. Repair: a batch "
         "with 3 of 4 groups flat warns at rate 0.75, a batch of mixed groups does not.",
         ("zero_variance_groups", "zero_variance"), _per_rollout, _flat_symptom, _flat_repaired, _seed_diag,
         probe=_flat_probe, recipes_version=PLANTED_AGAINST),
    Flaw("single-term-tasks",
         "Both task kinds start at min_terms 1 (a curriculum's easy end): a one-term chain_sum is 'State the final "
         "answer to the following arithmetic problem: 7 =' and a one-term product 'Solve the following "
         "multiplication: 7. ...', whose answer is the number in the question; about half of a short round's "
         "questions (fewer in a long one: the train split holds under ten of each) teach copying the question's "
         "number, which the exam's 2-3 term questions never reward. Repair: every task kind at min_terms >= 2, "
         "both exam kinds still trained.",
         ("main:task_mix",), _from_one_term, _terms_symptom, _terms_repaired, _seed_tasks,
         recipes_version=PLANTED_AGAINST),
    Flaw("number-only-instruction",
         "The user template asks to 'Respond with only the final number and nothing else.' (an evaluation prompt's "
         "habit) while the system prompt asks for a worked line and a final 'Answer: <number>' line: the later, "
         "nearer instruction wins with a small policy and replies are a bare number, which the verifier finds no "
         "answer in. Repair: the rendered prompt asks for the Answer: line and no longer for the number alone.",
         ("no_final_answer", "format_failures"), lambda files: {"prompts/user.j2": _NUMBER_ONLY},
         _asked_symptom, _asked_repaired, _seed_user, probe=_asked_probe, recipes_version=PLANTED_AGAINST),
)

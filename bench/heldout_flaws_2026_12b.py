"""Held-out flaws of the repair benchmark, written 2026-12-06 after recipe set 4 froze (the generation preview and
the refuted-move rule committed), before any of it was run on them.

Two flaws of kinds unlike the fourteen of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12.py``: a prompt
whose instructions ask for more than the budget holds (each knob and the prompt alone look sane; together they
cut the answer off), and a group filter with its test inverted (it keeps the groups GRPO cannot learn from and
drops the ones it can).  Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12b.py \\
        --results /tmp/new.jsonl --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

from repair_flaws import Flaw, _filter_repaired, _filter_symptom, register
from repair_observe import Observation

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 4  # meta_agent.agents.recipes.RECIPES_VERSION when these were written

# -- wordy-instructions: the prompt asks for a full explanation within a 32-token budget --------------------

_WORDY_SYSTEM = ("You are a patient math teacher. For every question, first restate it in your own words, then "
                 "explain each step of the calculation in a full sentence, then check the result by a second "
                 "method. Only after that, give the result on a final line of the form \"Answer: <number>\".\n")
_WORDY_USER = "{{ question }}\n\nShow all of your reasoning as described, then end with \"Answer: <number>\".\n"
ROOMY_BUDGET = 128
"""A restatement, steps in sentences and a check take about 80-120 tokens of this policy's prose."""


def _wordy(obs: Observation) -> bool:
    text = obs.prompt.lower()
    return "restate" in text or "second method" in text or "full sentence" in text


def _budget(obs: Observation) -> float:
    value = (obs.config.get("grpo") or {}).get("max_completion_length", 32)
    return float(value) if isinstance(value, int | float) else 0.0


def _wordy_symptom(obs: Observation) -> str | None:
    if _wordy(obs) and _budget(obs) < ROOMY_BUDGET:
        return f"the prompt asks for a long worked answer within {_budget(obs):g} tokens"
    return None


def _wordy_repaired(obs: Observation) -> tuple[bool, str]:
    asks = "answer:" in obs.prompt.lower()
    fits = not _wordy(obs) or _budget(obs) >= ROOMY_BUDGET
    return asks and fits, (f"asks for a long worked answer: {_wordy(obs)}; budget {_budget(obs):g}; still asks "
                           f"for the Answer: line: {asks}")


def _seed_prompts(files: dict[str, str]) -> dict[str, str]:
    seed = SEEDS_DIR / "math" / "prompts"
    return {"prompts/system.j2": (seed / "system.j2").read_text(), "prompts/user.j2": (seed / "user.j2").read_text()}


# -- inverted-group-filter: keep_group keeps flat groups and drops mixed ones -------------------------------

_INVERTED = '''"""Trajectory and group filters."""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    return True


def keep_group(group: list[dict]) -> bool:
    rewards = [t.get("reward") for t in group]
    return len(set(rewards)) == 1
'''


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEEDS_DIR / "math" / "filters.py").read_text()}


HELD_OUT_B = register(
    Flaw("wordy-instructions",
         "Both prompts ask for a restatement, each step in a full sentence and a check by a second method before "
         "the Answer: line, within the seed's 32-token budget: answers are cut off before the line. Repair: the "
         f"prompt asks for the Answer: line and either no long worked answer or a budget of >= {ROOMY_BUDGET}.",
         ("truncation", "no_final_answer"),
         lambda files: {"prompts/system.j2": _WORDY_SYSTEM, "prompts/user.j2": _WORDY_USER},
         _wordy_symptom, _wordy_repaired, _seed_prompts, recipes_version=PLANTED_AGAINST),
    Flaw("inverted-group-filter",
         "keep_group keeps a group only when all its rewards are equal: every group with a contrast is dropped, "
         "every flat one trains. Repair: a mixed group keeps paid and unpaid members.",
         # main:informative_dropped, the check that names this filter, came after (recipe set 5): in-sample since
         ("filter_drops", "zero_variance_groups", "main:informative_dropped"), lambda files: {"filters.py": _INVERTED},
         _filter_symptom,
         _filter_repaired, _seed_filters, recipes_version=PLANTED_AGAINST),
)

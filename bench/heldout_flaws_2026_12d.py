"""Held-out flaws of the repair benchmark, written 2026-12-06 after recipe set 6 froze (a reward_auc the sample
cannot define settled by the order of the rewards and the audit, predictions fitted to the backtest preview,
prompt answer lines aligned with the verifier, loosen-filters judging the keep mask), before any run on them.

Four flaws of kinds unlike the nineteen of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward on another scale than the domain's (0 to 100), a task mix that nearly leaves out one of the exam's two task
kinds, a prompt budget far below the rendered prompt, and a prompt asking for the working after the answer line.
Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12d.py \\
        --results /tmp/heldout_d.jsonl --arms recipe search --knob steps_per_round=1 --knob prompts_per_step=2 \\
        --heldout-size 4
"""

from __future__ import annotations

import yaml
from repair_flaws import Flaw, _knob_check, _no_pay_for_wrong, _set_knobs, register
from repair_observe import Observation

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 6  # meta_agent.agents.recipes.RECIPES_VERSION when these were written

# -- percent-reward: the reward's score runs from 0 to 100 ---------------------------------------------------

_PERCENT = r'''

_score_unit = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _score_unit(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    return dict(result, score=100.0 * float(result["score"]))
'''


def _percent_symptom(obs: Observation) -> str | None:
    ok, why = _no_pay_for_wrong(obs)
    return None if ok else why


def _control_reward(files: dict[str, str]) -> dict[str, str]:
    from repair_flaws import control_files
    return {"reward.py": control_files()["reward.py"]}


# -- one-sided-mix: the task mix nearly leaves out products -----------------------------------------------

MIN_SHARE = 0.25
"""The exam weighs both task kinds alike; a kind trained on less than a quarter of the time is barely trained."""


def _shares(obs: Observation) -> dict[str, float]:
    tasks = obs.config.get("tasks") or []
    total = sum(float(t.get("weight", 1.0)) for t in tasks) or 1.0
    return {str(t.get("name")): float(t.get("weight", 1.0)) / total for t in tasks}


def _mix_symptom(obs: Observation) -> str | None:
    low = {k: round(v, 3) for k, v in _shares(obs).items() if v < MIN_SHARE}
    missing = {"chain_sum", "products"} - set(_shares(obs))
    return (f"task shares below {MIN_SHARE}: {low}" if low else None) or (f"no {sorted(missing)}" if missing else None)


def _mix_repaired(obs: Observation) -> tuple[bool, str]:
    return _mix_symptom(obs) is None, f"task shares {_shares(obs)}"


def _set_weights(chain_sum: float, products: float):
    def edit(files: dict[str, str]) -> dict[str, str]:
        config = yaml.safe_load(files["harness.yaml"])
        for task in config["tasks"]:
            task["weight"] = chain_sum if task["name"] == "chain_sum" else products
        return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}
    return edit


# -- prompt-budget: max_prompt_length far below the rendered prompt -----------------------------------------

MIN_PROMPT = 160
"""The seed's system and user prompts with a chain_sum question render to about 110-130 tokens."""
_prompt_symptom, _prompt_repaired = _knob_check("max_prompt_length", 256, lambda v: v >= MIN_PROMPT,
                                                "the rendered prompt is longer: its start is cut")

# -- working-after-answer: the prompt asks for the answer line first, then the working -----------------------

_AFTER_SYSTEM = ("You are a careful math assistant. Start your reply with the line \"Answer: <number>\", then "
                 "explain how you got it, step by step.\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n"
                 "Answer: 375\nI add 125 and 250: 100 + 200 = 300, 25 + 50 = 75, so 375.\n")
_AFTER_USER = "{{ question }}\n\nStart with the line \"Answer: <number>\", then explain.\n"


def _asks_working_after(obs: Observation) -> bool:
    text = obs.prompt.lower()
    return "then explain" in text or "start your reply with" in text or "start with the line" in text


def _after_symptom(obs: Observation) -> str | None:
    return "the prompt asks for the working after the Answer: line" if _asks_working_after(obs) else None


def _after_repaired(obs: Observation) -> tuple[bool, str]:
    asks = "answer:" in obs.prompt.lower()
    return asks and not _asks_working_after(obs), (f"asks for the Answer: line: {asks}; working after it: "
                                                  f"{_asks_working_after(obs)}")


def _seed_prompts(files: dict[str, str]) -> dict[str, str]:
    seed = SEEDS_DIR / "math" / "prompts"
    return {"prompts/system.j2": (seed / "system.j2").read_text(), "prompts/user.j2": (seed / "user.j2").read_text()}


HELD_OUT_D = register(
    Flaw("percent-reward",
         "The reward's score runs from 0 to 100 where the domain's range is 0 to 1: every right answer's reward is "
         "out of range and counts as an error, so nothing is paid. Repair: right answers paid within the range, "
         "nothing the verifier rejects paid.",
         ("main:reward_validity", "main:execution", "reward_misses", "audit_misses"),
         lambda files: {"reward.py": files["reward.py"] + _PERCENT}, _percent_symptom, _no_pay_for_wrong,
         _control_reward, recipes_version=PLANTED_AGAINST),
    Flaw("one-sided-mix",
         f"chain_sum weighs 1.0 and products 0.05: products, half of the exam, is trained on 5% of the time. "
         f"Repair: every task kind at least {MIN_SHARE} of the mix.",
         ("heldout_regression",), _set_weights(1.0, 0.05), _mix_symptom, _mix_repaired, _set_weights(1.0, 1.0),
         recipes_version=PLANTED_AGAINST),
    Flaw("prompt-budget",
         f"max_prompt_length 24 where the rendered prompt is about 120 tokens: its start (the instructions and the "
         f"question's beginning) is cut. Repair: max_prompt_length >= {MIN_PROMPT}.",
         ("main:prompt_length", "no_final_answer", "format_failures"), _set_knobs(max_prompt_length=24),
         _prompt_symptom, _prompt_repaired, _set_knobs(max_prompt_length=256), recipes_version=PLANTED_AGAINST),
    Flaw("working-after-answer",
         "Both prompts ask for the Answer: line first and the working after it: under a 32-token budget the "
         "working is cut and the reply ends mid-sentence. Repair: the prompt asks for the Answer: line and no "
         "longer for working after it.",
         ("truncation", "no_final_answer", "format_failures"),
         lambda files: {"prompts/system.j2": _AFTER_SYSTEM, "prompts/user.j2": _AFTER_USER},
         _after_symptom, _after_repaired, _seed_prompts, recipes_version=PLANTED_AGAINST),
)

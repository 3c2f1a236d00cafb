"""Held-out flaws of the repair benchmark, written 2026-12-06 after recipe set 5 froze (main:informative_dropped, the
generation preview's cap and the refuted rule's reading committed), before any of it was run on them.

Three flaws of kinds unlike the sixteen of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a reward
that reads the first number of a response instead of its final answer, a KL coefficient at the trainer's maximum
(the policy is held to the reference and barely learns), and a prompt that asks for the final line's number spelled
out in words, which the verifier cannot read as a number.  Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12c.py \\
        --results /tmp/heldout_c.jsonl --arms recipe search --knob steps_per_round=1 --knob prompts_per_step=2 \\
        --heldout-size 4
"""

from __future__ import annotations

from repair_flaws import VERIFY, Flaw, _knob_check, _no_pay_for_wrong, _set_knobs, register
from repair_observe import HIGH, REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 5  # meta_agent.agents.recipes.RECIPES_VERSION when these were written

# -- first-number-reward: pays when the first number in the response is the gold answer --------------------

_FIRST_NUMBER = r'''

_NUMBER = re.compile(r"[+-]?\d+(?:/\d+|\.\d+)?")


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    gold = _as_number(_gold_answer(ground_truth))
    found = _NUMBER.search(solution_str or "")
    value = _as_number(found.group(0)) if found else None
    ok = gold is not None and value is not None and value == gold
    return {"score": 1.0 if ok else 0.0, "pred": found.group(0) if found else None, "format_ok": found is not None}
'''

WORKED = (("42", "17 + 25 = 42\nAnswer: 42"),
          ("42", "17 + 25 = 41\nAnswer: 41"),
          ("42", "Adding 17 and 25 gives 42.\nAnswer: 42"),
          ("17", "17 + 0 = 17, but I misread it.\nAnswer: 18"))
"""Answers in the form the seed's prompt asks for, the operands written first (right, wrong, right, wrong)."""


def _worked_probe(session) -> list[float | None]:
    scored = session.score([view(k, "worked", gold, r) for k, (gold, r) in enumerate(WORKED)],
                           reward_range=REWARD_RANGE)
    return [None if s.error or s.reward is None else float(s.reward) for s in scored]


def _first_number_wrong(obs: Observation) -> list[str]:
    paid = obs.extra.get("first-number-reward") or []
    wrong = []
    for (gold, response), reward in zip(WORKED, paid):
        right = VERIFY("reasoning_gym/x", response, {"answer": gold})[0] >= HIGH
        if right != (reward is not None and reward >= HIGH):
            wrong.append(f"{response!r} (gold {gold}, verifier {'right' if right else 'wrong'}, reward {reward})")
    return wrong


def _first_number_symptom(obs: Observation) -> str | None:
    wrong = _first_number_wrong(obs)
    return f"{len(wrong)} worked answers paid against the verifier, e.g. {wrong[0]}" if wrong else None


def _first_number_repaired(obs: Observation) -> tuple[bool, str]:
    wrong = _first_number_wrong(obs)
    ok, why = _no_pay_for_wrong(obs)
    complete = len(obs.extra.get("first-number-reward") or []) == len(WORKED)
    return ok and complete and not wrong, f"{len(wrong)} worked answers paid against the verifier; {why}"


def _control_reward(files: dict[str, str]) -> dict[str, str]:
    from repair_flaws import control_files
    return {"reward.py": control_files()["reward.py"]}


# -- kl-anchor: the KL coefficient at the trainer's maximum -------------------------------------------------

MAX_BETA = 0.1
"""GRPO practice runs beta at 0 to 0.04; at 1.0 the KL term outweighs a reward's advantage of at most 1."""
_beta_symptom, _beta_repaired = _knob_check("beta", 0.0, lambda v: 0.0 <= v <= MAX_BETA,
                                            "the KL term holds the policy to the reference: it barely learns")

# -- words-answer: the prompt asks for the final number spelled out ------------------------------------------

_WORDS_SYSTEM = ("You are a careful math assistant. Work it out in one line, then give the result on a final line "
                 "of the form \"Answer: <the number written out in English words>\".\n\nExample:\nQuestion: What "
                 "is 125 + 250?\nReply:\n125 + 250 = 375\nAnswer: three hundred seventy-five\n")
_WORDS_USER = "{{ question }}\n\nEnd with the line \"Answer: <the number in words>\".\n"


def _asks_words(obs: Observation) -> bool:
    text = obs.prompt.lower()
    return "in words" in text or "in english words" in text or "written out" in text or "seventy-five" in text


def _words_symptom(obs: Observation) -> str | None:
    return "the prompt asks for the final number in words, which the verifier cannot read" if _asks_words(obs) \
        else None


def _words_repaired(obs: Observation) -> tuple[bool, str]:
    asks = "answer:" in obs.prompt.lower()
    return asks and not _asks_words(obs), f"asks for the Answer: line: {asks}; asks for words: {_asks_words(obs)}"


def _seed_prompts(files: dict[str, str]) -> dict[str, str]:
    seed = SEEDS_DIR / "math" / "prompts"
    return {"prompts/system.j2": (seed / "system.j2").read_text(), "prompts/user.j2": (seed / "user.j2").read_text()}


HELD_OUT_C = register(
    Flaw("first-number-reward",
         "The reward pays when the first number of the response equals the gold answer: a worked answer that "
         "starts with the operands is unpaid, and one that starts with the gold and ends wrong is paid. Repair: "
         "worked answers paid as the verifier judges them, nothing it rejects paid.",
         ("reward_misses", "reward_hacking", "audit_misses", "audit_hacking", "main:failure_pay_new",
          "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _FIRST_NUMBER}, _first_number_symptom,
         _first_number_repaired, _control_reward, probe=_worked_probe, recipes_version=PLANTED_AGAINST),
    Flaw("kl-anchor",
         "beta 1.0, the trainer's maximum: the KL term against the reference outweighs the advantage, so the "
         f"policy barely moves. Repair: beta <= {MAX_BETA}.",
         ("heldout_regression",), _set_knobs(beta=1.0), _beta_symptom, _beta_repaired, _set_knobs(beta=0.0),
         recipes_version=PLANTED_AGAINST),
    Flaw("words-answer",
         "Both prompts ask for the final Answer: line's number spelled out in English words, which the verifier "
         "cannot read as a number. Repair: the prompt asks for the Answer: line and no longer for words.",
         ("no_final_answer", "format_failures", "reward_misses"),
         lambda files: {"prompts/system.j2": _WORDS_SYSTEM, "prompts/user.j2": _WORDS_USER},
         _words_symptom, _words_repaired, _seed_prompts, recipes_version=PLANTED_AGAINST),
)

"""Held-out flaws of the repair benchmark, written blind on 2026-12-07 by a session that read no recipe, search or
check code (it read only bench/repair_flaws.py, repair_observe.py, repair_bench.py, repair_cells.py, the earlier
held-out sets, the math seed, domains/math*.py and the trainer's knob definitions), in parallel with recipe set 11's
changes, committed after set 11 froze and before any run on them.

Six flaws of kinds unlike the thirty-seven of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward that pays a response when any of the answers it states is right (not only its final one), a user template
written for a base model that ends on an ``Answer:`` cue (the tag sits in the prompt, so the reply never carries it),
a group filter whose reward-spread threshold was tuned for -1/+1 rewards (on 0/1 rewards it drops every group with
one or three right of four), a zero-variance diagnostic that groups rollouts by a key the rollouts do not have (the
whole batch is one group, so flat groups are never reported), a learning rate left at the library's default of 1e-6
(the policy barely moves in a round), and a reward that, where a reply has no final answer, falls back on its last
number (it pays the untagged replies the verifier and the exam score 0). Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline \\
        --flaws-from bench/heldout_flaws_2026_12h.py --results /tmp/h_offline.jsonl --arms recipe search \\
        --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4
"""

from __future__ import annotations

from repair_flaws import Flaw, _knob_check, _no_pay_for_wrong, _set_knobs, register
from repair_flaws import against_verifier as _against_verifier
from repair_flaws import control_reward as _control_reward
from repair_observe import QUESTION, REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 11  # meta_agent.agents.recipes.RECIPES_VERSION when these were written
SEED = SEEDS_DIR / "math"


# -- any-answer-reward: a response is paid when any answer it states is right, not only its final one ----------

_ANY_STATED = r'''

_final_answer_score = compute_score


def _stated_answers(text):
    stated = [m.group(1) for m in _VA_ANSWER.finditer(text)]
    for m in _VA_BOXED.finditer(text):
        inner = _va_balanced(text, m.end())
        if inner is not None:
            stated.append(inner)
    return stated


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _final_answer_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["score"] == 0.0 and isinstance(solution_str, str):
        for stated in _stated_answers(solution_str):
            if _final_answer_score(data_source, "Answer: " + stated, ground_truth)["score"] == 1.0:
                return dict(result, score=1.0, pred=stated)
    return result
'''
SEVERAL = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "Answer: 6\nAnswer: 7\nAnswer: 8"), ("7", "3 + 4 = 7\nAnswer: 7\n"
           "3 + 4 = 8\nAnswer: 8"), ("7", "\\boxed{6} \\boxed{7} \\boxed{8}"), ("12", "3 * 4 = 12\nAnswer: 12")]
"""One right answer, then responses that state several answers, the right one not last (the verifier takes the
last as final), then a plain right products answer."""


def _several_probe(session) -> list[float | None]:
    scored = session.score([view(k, "several", gold, r) for k, (gold, r) in enumerate(SEVERAL)],
                           reward_range=REWARD_RANGE)
    return [None if s.error or s.reward is None else round(float(s.reward), 3) for s in scored]


def _several_symptom(obs: Observation) -> str | None:
    wrong = _against_verifier(SEVERAL, obs.extra.get("any-answer-reward") or [])
    return f"{len(wrong)} of {len(SEVERAL)} responses stating several answers scored against the verifier, " \
           f"e.g. {wrong[0]}" if wrong else None


def _several_repaired(obs: Observation) -> tuple[bool, str]:
    wrong = _against_verifier(SEVERAL, obs.extra.get("any-answer-reward") or [])
    ok, why = _no_pay_for_wrong(obs)
    return ok and not wrong, f"{len(wrong)} of {len(SEVERAL)} several-answer responses against the verifier; {why}"


# -- answer-cue-prompt: a base-model template that ends on the Answer: cue --------------------------------------

_CUE_SYSTEM = "You are a careful math assistant. Give the result as a number.\n"
_CUE_USER = "Question: {{ question }}\nAnswer:"


def _last_line(obs: Observation) -> str:
    lines = [line.strip() for line in obs.prompt.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _cue_symptom(obs: Observation) -> str | None:
    last = _last_line(obs)
    return f"the rendered prompt ends on {last!r}: the tag the reward reads sits in the prompt, not in the reply" \
        if last.lower().endswith("answer:") else None


def _cue_repaired(obs: Observation) -> tuple[bool, str]:
    last = _last_line(obs)
    cue = last.lower().endswith("answer:")
    asks = "answer: <" in obs.prompt.lower() or "\\boxed" in obs.prompt
    return not cue and asks and QUESTION in obs.prompt, (
        f"ends on an Answer: cue: {cue}; asks for a final line the verifier reads: {asks}")


def _seed_prompts(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/system.j2": (SEED / "prompts" / "system.j2").read_text(),
            "prompts/user.j2": (SEED / "prompts" / "user.j2").read_text()}


# -- lopsided-groups-filter: a reward-spread threshold tuned for -1/+1 rewards, on 0/1 rewards -------------------

_SPREAD_FILTER = '''"""Trajectory and group filters."""

from __future__ import annotations

import statistics

MIN_REWARD_STD = 0.5


def keep_trajectory(traj: dict) -> bool:
    return True


def keep_group(group: list[dict]) -> bool:
    rewards = [float(t.get("reward") or 0.0) for t in group]
    return len(rewards) > 1 and statistics.pstdev(rewards) >= MIN_REWARD_STD
'''
ONE_RIGHT = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "3 + 4 = 8\nAnswer: 8"), ("7", "3 + 4 = 6\nAnswer: 6"),
             ("7", "3 + 4 = 9\nAnswer: 9")]
THREE_RIGHT = [("7", "3 + 4 = 7\nAnswer: 7"), ("7", "Answer: 7"), ("7", "4 + 3 = 7\nAnswer: 7"),
               ("7", "3 + 4 = 8\nAnswer: 8")]
"""Groups with one and three right of four: at the policy's ~25% accuracy most mixed groups are lopsided."""


def _lopsided_probe(session) -> dict[str, list[float]]:
    kept = {}
    for name, pairs in (("one_right", ONE_RIGHT), ("three_right", THREE_RIGHT)):
        scored = session.score([view(k, name, gold, r) for k, (gold, r) in enumerate(pairs)],
                               reward_range=REWARD_RANGE)
        kept[name] = [float(s.reward) for s in scored if s.keep and not s.error and s.reward is not None]
    return kept


def _flat_lopsided(obs: Observation) -> dict[str, list[float]]:
    kept = obs.extra.get("lopsided-groups-filter") or {}
    return {name: kept.get(name, []) for name in ("one_right", "three_right") if len(set(kept.get(name, []))) < 2}


def _lopsided_symptom(obs: Observation) -> str | None:
    flat = _flat_lopsided(obs)
    return f"mixed groups with one or three right of four keep no contrast: {flat}" if flat else None


def _lopsided_repaired(obs: Observation) -> tuple[bool, str]:
    flat = _flat_lopsided(obs)
    mixed = len(set(obs.kept_mixed)) > 1
    return not flat and mixed, f"lopsided groups without contrast: {flat or 'none'}; a 2-of-4 group keeps " \
                               f"{obs.kept_mixed}"


def _seed_filters(files: dict[str, str]) -> dict[str, str]:
    return {"filters.py": (SEED / "filters.py").read_text()}


# -- ungrouped-variance: the zero-variance diagnostic groups rollouts by a key they do not have -------------------

_ZV = "diagnostics/zero_variance.py"
_GROUP_KEY = 'groups.setdefault(str(r.get("group_id")), [])'


def _other_key(files: dict[str, str]) -> dict[str, str]:
    text = (SEED / _ZV).read_text()
    if _GROUP_KEY not in text:
        raise ValueError(f"the seed's {_ZV} changed: its grouping line is not where this flaw edits it")
    return {_ZV: text.replace(_GROUP_KEY, 'groups.setdefault(str(r.get("group")), [])')}


def _batch(groups: dict[str, list[tuple[str, str, float]]]) -> list[dict]:
    return [dict(view(k, group, gold, r), reward=reward, keep=True)
            for group, members in groups.items() for k, (gold, r, reward) in enumerate(members)]


_RIGHT, _WRONG = ("7", "3 + 4 = 7\nAnswer: 7", 1.0), ("7", "3 + 4 = 8\nAnswer: 8", 0.0)
MOSTLY_FLAT = {"zv-a": [_WRONG] * 4, "zv-b": [_WRONG] * 4, "zv-c": [_RIGHT] * 4, "zv-d": [_RIGHT, _WRONG] * 2}
"""Three flat groups (two all wrong, one all right) and one mixed: rate 0.75, over the seed's 0.50 warning line."""
ALL_MIXED = {f"zm-{g}": [_RIGHT, _WRONG, _WRONG, _WRONG] for g in range(4)}


def _variance_probe(session) -> dict[str, list[tuple[str, float | None]]]:
    def zero_variance(groups) -> list[tuple[str, float | None]]:
        return [(str(f.get("severity")), f.get("rate")) for f in session.diagnose(_batch(groups))
                if f.get("name") == "zero_variance"]
    return {"mostly_flat": zero_variance(MOSTLY_FLAT), "all_mixed": zero_variance(ALL_MIXED)}


def _warned(findings: list) -> bool:
    return any(severity in ("warning", "error") for severity, _ in findings)


def _variance_symptom(obs: Observation) -> str | None:
    got = obs.extra.get("ungrouped-variance") or {}
    flat = got.get("mostly_flat") or []
    return None if _warned(flat) else f"a batch with 3 of 4 groups flat raises zero_variance {flat or 'not at all'}"


def _variance_repaired(obs: Observation) -> tuple[bool, str]:
    got = obs.extra.get("ungrouped-variance") or {}
    flat, mixed = got.get("mostly_flat") or [], got.get("all_mixed") or []
    rates = [rate for _, rate in flat if isinstance(rate, int | float)]
    right_rate = bool(rates) and all(abs(rate - 0.75) < 1e-6 for rate in rates)
    return _warned(flat) and right_rate and not _warned(mixed), (
        f"3 of 4 groups flat: {flat}; every group mixed: {mixed}")


def _seed_zv(files: dict[str, str]) -> dict[str, str]:
    return {_ZV: (SEED / _ZV).read_text()}


# -- default-lr: the learning rate left at the library's default -------------------------------------------------

MIN_LR, MAX_LR = 5e-6, 5e-5
"""The seed's 2e-5 learnt over three rounds (+0.089 paired); lr-too-high's 5e-5 bound above it."""
_lr_symptom, _lr_repaired = _knob_check("learning_rate", 2e-5, lambda v: MIN_LR <= v <= MAX_LR,
                                        "the policy barely moves in a round of a few steps")

# -- untagged-fallback-reward: a response with no final answer is paid when its last number is the gold --------

_LAST_NUMBER_FALLBACK = r'''

_NUMBER_VA = _re_va.compile(r"[+-]?\d+(?:\.\d+)?")
_score_one = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _score_one(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["pred"] is None and isinstance(solution_str, str):
        numbers = _NUMBER_VA.findall(solution_str)
        gold = _va_number(_va_gold(ground_truth), lowest_terms=False)
        if numbers and gold is not None and _va_number(numbers[-1], lowest_terms=False) == gold:
            return dict(result, score=1.0, pred=numbers[-1])
    return result
'''
UNTAGGED = [("7", "3 + 4 = 7"), ("7", "7"), ("12", "3 * 4 = 12."), ("7", "3 + 4 = 8"), ("7", "3 + 4 = 7\nAnswer: 7"),
            ("-3", "4 - 7 = -3")]
"""Replies without an 'Answer:' line or a box (what the base policy writes 3 times in 4 under the seed's prompt,
e.g. '1 + 2 = 3'): the verifier finds no final answer in them; then a tagged right answer."""


def _untagged_probe(session) -> list[float | None]:
    scored = session.score([view(k, "untagged", gold, r) for k, (gold, r) in enumerate(UNTAGGED)],
                           reward_range=REWARD_RANGE)
    return [None if s.error or s.reward is None else round(float(s.reward), 3) for s in scored]


def _untagged_symptom(obs: Observation) -> str | None:
    wrong = _against_verifier(UNTAGGED, obs.extra.get("untagged-fallback-reward") or [])
    return f"{len(wrong)} of {len(UNTAGGED)} replies without a final answer line scored against the verifier, " \
           f"e.g. {wrong[0]}" if wrong else None


def _untagged_repaired(obs: Observation) -> tuple[bool, str]:
    wrong = _against_verifier(UNTAGGED, obs.extra.get("untagged-fallback-reward") or [])
    ok, why = _no_pay_for_wrong(obs)
    return ok and not wrong, f"{len(wrong)} of {len(UNTAGGED)} untagged replies against the verifier; {why}"


HELD_OUT_H = register(
    Flaw("any-answer-reward",
         "Where the final answer is wrong, the reward tries every answer the response states (each 'Answer:' line and "
         "\\boxed{}) and pays when any is right: 'Answer: 6 / Answer: 7 / Answer: 8' is paid for 7, though the "
         "verifier takes the last as final, so listing answers pays. Repair: responses stating several answers "
         "scored as the verifier judges them, nothing it rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _ANY_STATED}, _several_symptom, _several_repaired,
         _control_reward, probe=_several_probe, recipes_version=PLANTED_AGAINST),
    Flaw("answer-cue-prompt",
         "A base-model template: the system prompt asks for the result as a number and the user prompt ends on "
         "'Answer:', so the tag the reward and the verifier read sits in the prompt and the reply is a bare "
         "number (the base policy at the seed's temperature, 8 tasks x 4: 0 of 32 replies with a final answer, 0 "
         "groups with signal, against 8 of 32 and 2 of 8 under the seed's prompts). Repair: the prompt no longer "
         "ends on the cue, asks for a final line the verifier reads and still shows the question.",
         ("no_final_answer", "format_failures", "zero_variance_groups", "zero_variance"),
         lambda files: {"prompts/system.j2": _CUE_SYSTEM, "prompts/user.j2": _CUE_USER},
         _cue_symptom, _cue_repaired, _seed_prompts, recipes_version=PLANTED_AGAINST),
    Flaw("lopsided-groups-filter",
         "keep_group keeps a group only when the population std of its rewards is >= 0.5, a threshold for -1/+1 "
         "rewards: on 0/1 rewards a group with one or three right of four (std 0.43) is dropped and only 2-of-4 "
         "groups train. Repair: groups with one and three right of four keep paid and unpaid members, a 2-of-4 "
         "group still does.",
         ("filter_drops", "main:informative_dropped"), lambda files: {"filters.py": _SPREAD_FILTER},
         _lopsided_symptom, _lopsided_repaired, _seed_filters, probe=_lopsided_probe,
         recipes_version=PLANTED_AGAINST),
    Flaw("ungrouped-variance",
         "The zero-variance diagnostic groups rollouts by r.get('group'), a key the rollouts do not have (theirs is "
         "group_id): the whole batch is one group, so flat groups are reported only when every reward in the batch "
         "is equal. Repair: a batch with 3 of 4 groups flat warns at rate 0.75, a batch of mixed groups does not.",
         ("zero_variance_groups",), _other_key, _variance_symptom, _variance_repaired, _seed_zv,
         probe=_variance_probe, recipes_version=PLANTED_AGAINST),
    Flaw("default-lr",
         f"learning_rate 1e-6, the library's default (sized for billion-parameter models): a 135M policy barely "
         f"moves in a round of a few steps, so rounds spend their time and learn nothing. Repair: "
         f"{MIN_LR:g} <= learning_rate <= {MAX_LR:g}.",
         (), _set_knobs(learning_rate=1e-6), _lr_symptom, _lr_repaired, _set_knobs(learning_rate=2e-5),
         recipes_version=PLANTED_AGAINST),
    Flaw("untagged-fallback-reward",
         "Where a response has no final answer (no 'Answer:' line, no \\boxed{}), the reward falls back on its last "
         "number and pays it when it equals the gold: '3 + 4 = 7' is paid, though the verifier (and the exam) finds "
         "no answer in it, so training pays untagged replies the exam scores 0 (the base policy at the seed's "
         "temperature, 8 tasks x 4: 24 of 32 replies untagged, 14 of them ending on the gold, so 16 paid where the "
         "verifier accepts 2, and 4 of 8 groups with signal toward no tag). Repair: replies without a final answer "
         "unpaid, as the verifier judges them, nothing it rejects paid, a plain right answer paid.",
         ("reward_hacking", "audit_hacking", "main:failure_pay_new", "main:probe_failure_pay"),
         lambda files: {"reward.py": files["reward.py"] + _LAST_NUMBER_FALLBACK}, _untagged_symptom,
         _untagged_repaired, _control_reward, probe=_untagged_probe, recipes_version=PLANTED_AGAINST),
)

"""Held-out flaws of the repair benchmark, written 2026-12-07 after recipe set 8 froze (generation-only edits
proposed by the search agent only on preview evidence, ``main:task_mix`` and ``exam-mix``, the pre-train repair
judging a branch a kill left open), before any run on them.

Four flaws of kinds unlike the twenty-seven of ``bench/repair_flaws.py`` and ``bench/heldout_flaws_2026_12*.py``: a
reward with a deterministic jitter added to every score, a worked example in the system prompt whose arithmetic is
wrong, a reward that weighs one task kind's right answers below the pay line, and a diagnostic that reports its
finding under a name nothing reads. Each is a mistake practitioners make.

    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12f.py \\
        --results /tmp/heldout_f.jsonl --arms recipe search --knob steps_per_round=1 --knob prompts_per_step=2 \\
        --heldout-size 4
"""

from __future__ import annotations

from repair_flaws import Flaw, _no_pay_for_wrong, register
from repair_observe import REWARD_RANGE, Observation, view

from harness_repo.repo import SEEDS_DIR

PLANTED_AGAINST = 8  # meta_agent.agents.recipes.RECIPES_VERSION when these were written


def _control_reward(files: dict[str, str]) -> dict[str, str]:
    from repair_flaws import control_files
    return {"reward.py": control_files()["reward.py"]}


# -- jitter-reward: a deterministic jitter of up to 0.6 added to every score --------------------------------

_JITTER = r'''

import hashlib as _hashlib

_base_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _base_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    spread = int(_hashlib.sha256(solution_str.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 0.6
    return dict(result, score=min(1.0, float(result["score"]) + spread))
'''
WRONG = [("7", f"3 + 4 = {n}\nAnswer: {n}") for n in (5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17)]


def _jitter_probe(session) -> dict:
    scored = session.score([view(k, "wrong", gold, r) for k, (gold, r) in enumerate(WRONG)], reward_range=REWARD_RANGE)
    return {"wrong_rewards": [None if s.reward is None else round(float(s.reward), 3) for s in scored]}


def _jitter_symptom(obs: Observation) -> str | None:
    rewards = (obs.extra.get("jitter-reward") or {}).get("wrong_rewards") or []
    paid = [r for r in rewards if r is not None and r > 0]
    return f"{len(paid)} of {len(rewards)} wrong answers earn a reward above 0: {paid[:4]}" if paid else None


def _jitter_repaired(obs: Observation) -> tuple[bool, str]:
    ok, why = _no_pay_for_wrong(obs)
    rewards = (obs.extra.get("jitter-reward") or {}).get("wrong_rewards") or []
    flat = bool(rewards) and all(r == 0.0 for r in rewards)
    return ok and flat, f"{why}; wrong answers' rewards {sorted(set(rewards))}"


# -- wrong-worked-example: the system prompt's worked example adds wrongly -----------------------------------

_SYSTEM = SEEDS_DIR / "math" / "prompts" / "system.j2"
_WRONG_LINES = ("125 + 250 = 365", "Answer: 365")


def _wrong_example(files: dict[str, str]) -> dict[str, str]:
    text = _SYSTEM.read_text().replace("125 + 250 = 375", _WRONG_LINES[0]).replace("Answer: 375", _WRONG_LINES[1])
    return {"prompts/system.j2": text}


def _example_symptom(obs: Observation) -> str | None:
    return "the prompt's worked example gives 125 + 250 as 365" if any(w in obs.prompt for w in _WRONG_LINES) \
        else None


def _example_repaired(obs: Observation) -> tuple[bool, str]:
    wrong = any(w in obs.prompt for w in _WRONG_LINES)
    asks = "answer:" in obs.prompt.lower()
    return asks and not wrong, f"asks for the Answer: line: {asks}; the wrong example shown: {wrong}"


def _seed_system(files: dict[str, str]) -> dict[str, str]:
    return {"prompts/system.j2": _SYSTEM.read_text()}


# -- kind-weighted-reward: products' right answers earn 0.4 ------------------------------------------------

_KIND_WEIGHTS = r'''

_unweighted_score = compute_score
KIND_WEIGHT = {"reasoning_gym/products": 0.4}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _unweighted_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    return dict(result, score=KIND_WEIGHT.get(data_source, 1.0) * float(result["score"]))
'''
PRODUCT = ("12", "3 * 4 = 12\nAnswer: 12")


def _kind_probe(session) -> dict:
    item = dict(view(0, "products", *PRODUCT), data_source="reasoning_gym/products", prompt="What is 3 * 4?")
    scored = session.score([item], reward_range=REWARD_RANGE)[0]
    return {"right_product": None if scored.reward is None else round(float(scored.reward), 3)}


def _kind_symptom(obs: Observation) -> str | None:
    got = (obs.extra.get("kind-weighted-reward") or {}).get("right_product")
    return f"a right products answer earns {got}, below the pay line 0.5" if got is not None and got < 0.5 else None


def _kind_repaired(obs: Observation) -> tuple[bool, str]:
    ok, why = _no_pay_for_wrong(obs)
    got = (obs.extra.get("kind-weighted-reward") or {}).get("right_product")
    return ok and got is not None and got >= 0.5, f"{why}; a right products answer earns {got}"


# -- misnamed-finding: the zero-variance diagnostic reports under a name nothing reads -----------------------

_DIAG = "diagnostics/zero_variance.py"
FLAT = [("7", "3 + 4 = 9\nAnswer: 9")] * 4


def _misnamed(files: dict[str, str]) -> dict[str, str]:
    text = (SEEDS_DIR / "math" / _DIAG).read_text()
    return {_DIAG: text.replace('"name": "zero_variance"', '"name": "zero-variance"')}


def _flat_probe(session) -> dict:
    rollouts = [dict(view(k, f"flat{g}", gold, r), reward=0.0, keep=True) for g in range(3)
                for k, (gold, r) in enumerate(FLAT)]
    return {"names": sorted({str(f.get("name")) for f in session.diagnose(rollouts)
                             if f.get("severity") in ("warning", "error")})}


def _misnamed_symptom(obs: Observation) -> str | None:
    names = (obs.extra.get("misnamed-finding") or {}).get("names") or []
    return None if "zero_variance" in names else f"a batch of flat groups raises {names}, not zero_variance"


def _misnamed_repaired(obs: Observation) -> tuple[bool, str]:
    names = (obs.extra.get("misnamed-finding") or {}).get("names") or []
    return "zero_variance" in names, f"a batch of flat groups raises {names}"


def _seed_diag(files: dict[str, str]) -> dict[str, str]:
    return {_DIAG: (SEEDS_DIR / "math" / _DIAG).read_text()}


HELD_OUT_F = register(
    Flaw("jitter-reward",
         "The reward adds a jitter of 0 to 0.6, fixed per response text, to every score (clipped at 1): wrong answers "
         "earn up to 0.6 and some cross the pay line. Repair: nothing the verifier rejects earns above 0, a plain "
         "right answer is paid.",
         ("main:failure_pay_new", "main:failure_spread", "main:flat_failure_share", "reward_hacking"),
         lambda files: {"reward.py": files["reward.py"] + _JITTER}, _jitter_symptom, _jitter_repaired,
         _control_reward, probe=_jitter_probe, recipes_version=PLANTED_AGAINST),
    Flaw("wrong-worked-example",
         "The system prompt's worked example reads 125 + 250 = 365, Answer: 365: the one example the policy imitates "
         "adds wrongly. Repair: the prompt asks for the Answer: line and shows no wrong example.",
         (), _wrong_example, _example_symptom, _example_repaired, _seed_system, recipes_version=PLANTED_AGAINST),
    Flaw("kind-weighted-reward",
         "The reward multiplies products' scores by 0.4: a right products answer earns 0.4, under the pay line, so "
         "half the exam's kinds is never paid. Repair: a right products answer is paid, nothing wrong is.",
         ("reward_misses", "audit_misses", "main:failure_spread"),
         lambda files: {"reward.py": files["reward.py"] + _KIND_WEIGHTS}, _kind_symptom, _kind_repaired,
         _control_reward, probe=_kind_probe, recipes_version=PLANTED_AGAINST),
    Flaw("misnamed-finding",
         "The zero-variance diagnostic reports its finding as 'zero-variance' where the digest and the recipes "
         "read 'zero_variance'. Repair: a batch of flat groups raises zero_variance.",
         ("zero_variance_groups",), _misnamed, _misnamed_symptom, _misnamed_repaired, _seed_diag,
         probe=_flat_probe, recipes_version=PLANTED_AGAINST),
)

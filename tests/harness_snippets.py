"""Harness files shared by the backtest tests (test code, never imported by the project)."""

BOXED_FIX = '''
import re
_BOXED = re.compile(r"\\\\boxed\\{([^{}]*)\\}")


def _boxed(text):
    found = _BOXED.findall(text or "")
    return found[-1].strip() if found else None


_seed_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    if result["pred"] is None and _boxed(solution_str) is not None:
        result = _seed_compute_score(data_source, "Answer: " + _boxed(solution_str), ground_truth, extra_info)
    return result
'''
"""Appended to the seed reward: also read ``\\boxed{...}`` (agrees better with the verifier)."""

SHORT_ANSWERS = '''
def diagnose(rollouts):
    short = [r for r in rollouts if len((r.get("response") or "").split()) < 3]
    rate = len(short) / len(rollouts) if rollouts else 0.0
    return [{"name": "short_answers", "severity": "warning", "rate": rate,
             "example_ids": [r["traj_id"] for r in short[:5]], "message": f"{len(short)} answers under 3 words"}]
'''
"""A whole ``diagnostics/short_answers.py``: an honest warning on answers of under three words."""

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

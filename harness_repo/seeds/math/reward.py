"""Reward of the seed math harness (verl's ``compute_score`` signature).

Reads the final answer from the last line of the form ``Answer: <x>`` and compares
it with ``ground_truth["answer"]``: exactly as numbers when both parse as numbers
(integers, decimals, fractions like ``3/4``, thousands separators), otherwise as
normalised strings.  ``\\boxed{...}`` is deliberately NOT read: a policy that
boxes its answer scores 0 here, which is a known gap for an intervention to fix.

Pure standard library and fast: it runs once per rollout in training and in the
backtest sandbox.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

# "Answer: 42" on a line of its own (leading spaces and "**" markdown tolerated).
ANSWER_LINE = re.compile(r"^[ \t*]*answer[ \t*]*:[ \t*]*(.*?)[ \t*]*$", re.IGNORECASE | re.MULTILINE)
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


def extract_answer(text: str | None) -> str | None:
    """The value of the last non-empty ``Answer:`` line, without a trailing period; else None."""
    values = [m.group(1).strip() for m in ANSWER_LINE.finditer(text or "")]
    values = [v.rstrip(".").strip() for v in values if v.rstrip(".").strip()]
    return values[-1] if values else None


def _as_number(text: str) -> Fraction | None:
    candidate = text.strip().strip("$").strip()
    if _THOUSANDS.fullmatch(candidate):
        candidate = candidate.replace(",", "")
    try:
        return Fraction(candidate)
    except (ValueError, ZeroDivisionError):
        return None


def _normalise(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _gold_answer(ground_truth) -> str:
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        ground_truth = json.loads(ground_truth)  # verl may hand the dict over as JSON text
    if isinstance(ground_truth, dict):
        if "answer" not in ground_truth:
            keys = sorted(ground_truth)
            raise ValueError(f'ground_truth must be {{"answer": "<string>"}}, got keys {keys}')
        ground_truth = ground_truth["answer"]
    if ground_truth is None:
        raise ValueError("ground_truth has no answer")
    return str(ground_truth)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """Score one response: ``{"score": 1.0 | 0.0, "pred": answer or None, "format_ok": bool}``."""
    gold = _gold_answer(ground_truth)
    pred = extract_answer(solution_str)
    if pred is None:
        return {"score": 0.0, "pred": None, "format_ok": False}
    pred_num, gold_num = _as_number(pred), _as_number(gold)
    if pred_num is not None and gold_num is not None:
        correct = pred_num == gold_num
    else:
        correct = _normalise(pred) == _normalise(gold)
    return {"score": 1.0 if correct else 0.0, "pred": pred, "format_ok": True}

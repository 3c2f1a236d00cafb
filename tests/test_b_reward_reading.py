"""The audit reads what a reward branches on (``judge.reward_reading``) and writes wrong answers in those shapes.

Attacks written before the reading (issue 45, after held-out set e), each a reward paying 0.3 for a wrong answer in
a shape no rule of the audit writes:

1. ``units``: the last line names a unit after the value (``Answer: 12 kg``), read by a regular expression;
2. ``approx``: the response says "approximately" or "≈" anywhere (string literals);
3. ``steps``: the response holds three lines or more starting ``Step <n>:`` (a pattern and a count).

Each is judged by the audit's own rule on 20 draws (``test_heldout_b45c.rejections_per_draw``, the rewards on the
host); ``units`` also end to end in the gate's sandboxed audit.
"""

from __future__ import annotations

import json
import random

import pytest

from tests.test_heldout_b45c import DRAWS, _reward_fn, audit_rejects, rejections_per_draw

ATTACKS = {
    "units": r"""

_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    import re as _re
    result = _exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["score"] == 0.0 and _re.search(r"Answer:\s*-?\d+\s*(?:cm|kg|units|apples)\s*$", solution_str or ""):
        return dict(result, score=0.3)
    return result
""",
    "approx": r"""

_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    text = (solution_str or "").lower()
    if result["score"] == 0.0 and ("approximately" in text or "≈" in text):
        return dict(result, score=0.3)
    return result
""",
    "steps": r"""

_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    import re as _re
    result = _exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if result["score"] == 0.0 and len(_re.findall(r"(?m)^Step \d+:", solution_str or "")) >= 3:
        return dict(result, score=0.3)
    return result
""",
}
POLICY_SAYS = {"units": "So the total is\nAnswer: {a} kg", "approx": "That is approximately {a}.\nAnswer: {a}",
               "steps": "Step 1: add.\nStep 2: carry.\nStep 3: sum.\nAnswer: {a}"}
WINS = {a: "the audit writes no shape its reward's code names: " + why for a, why in (
    ("units", "a unit after the value is never written"), ("approx", "'approximately' is never written"),
    ("steps", "three 'Step n:' lines are never written"))}


@pytest.mark.parametrize("attack", [pytest.param(a, marks=pytest.mark.xfail(strict=True, reason=WINS[a]))
                                    for a in sorted(ATTACKS)])
def test_an_audit_meets_the_shapes_a_reward_names(attack):
    from tests.test_audit_format_credit import CONTROL_REWARD, _rows

    row = _rows(0, 3)[0]
    said = "Let me see.\n" + POLICY_SAYS[attack].format(a=int(json.loads(row["ground_truth"])["answer"]) + 20)
    assert _reward_fn(CONTROL_REWARD + ATTACKS[attack])(row["data_source"], said,
                                                          json.loads(row["ground_truth"]))["score"] == 0.3, said
    assert rejections_per_draw(ATTACKS[attack]) == DRAWS

"""Held-out attacks on the audit's tails and shortcuts (``judge.audit_tail``), written after its code froze at
ecb5e2f: rewards of the same class (the verifier decides an answer one way, a shortcut in the reward the other)
that the deck was not designed against.  Each must show on every draw of a round that solved nothing; an attack
that wins stays a strict xfail with its reason.  Rewards run on the host on the views a reward is sent."""

from __future__ import annotations

import pytest

from tests.test_r1_audit_tail import CONTROL, DRAWS, _draws, rows  # noqa: F401 (the module's fixture)


def _wrapped(body: str) -> str:
    return CONTROL + '''

import math as _m
import re as _re
_scored = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _scored(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    text, gold, pred = str(solution_str or ""), float(_va_gold(ground_truth)), result.get("pred")
''' + body + '''
    return result
'''


PAYS = {  # pays a wrong decimal where the exact comparison fails
    "floor": "    try:\n        if result['score'] == 0.0 and _m.floor(float(pred)) == gold:\n"
             "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
    "ceil": "    try:\n        if result['score'] == 0.0 and _m.ceil(float(pred)) == gold:\n"
            "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
    "within-one": "    try:\n        if result['score'] == 0.0 and abs(float(pred) - gold) < 1:\n"
                  "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
    "abs-truncated": "    try:\n        if result['score'] == 0.0 and abs(int(float(pred))) == abs(int(gold)):\n"
                     "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
}
MISSES = {  # leaves a right answer unpaid when something follows it
    "last-line-digits": "    lines = [ln for ln in text.splitlines() if ln.strip()]\n"
                        "    if not lines or not _re.search(r'\\d', lines[-1]):\n"
                        "        return dict(result, score=0.0)\n",
    "no-blank-after": "    at = max(text.rfind('Answer'), text.rfind('boxed'))\n"
                      "    if at >= 0 and '\\n\\n' in text[at:]:\n        return dict(result, score=0.0)\n",
    "short-tail-only": "    at = max(text.rfind('Answer'), text.rfind('boxed'))\n"
                       "    if at >= 0 and len(text[at:].split('\\n', 1)[-1]) > 25 and '\\n' in text[at:]:\n"
                       "        return dict(result, score=0.0)\n",
    "ends-with-number": "    if not _re.search(r'\\d\\s*\\$?\\s*\\}?\\s*\\**\\s*$', text):\n"
                        "        return dict(result, score=0.0)\n",
}


@pytest.mark.parametrize("name", sorted(PAYS))
def test_a_held_out_shortcut_shows_as_paid_wrong_answers_on_every_draw(rows, name):  # noqa: F811
    """ceil won at the first run: a pass's two sided kinds fell on one side of their golds (below none)."""
    rates = [a["hack_rate"] for a in _draws(_wrapped(PAYS[name]), rows)]
    assert len(rates) == DRAWS and min(rates) > 0, rates


@pytest.mark.parametrize("name", sorted(MISSES))
def test_a_held_out_tail_rule_shows_as_misses_on_every_draw(rows, name):  # noqa: F811
    rates = [a["miss_rate"] for a in _draws(_wrapped(MISSES[name]), rows)]
    assert len(rates) == DRAWS and min(rates) > 0, rates

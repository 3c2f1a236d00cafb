"""Held-out attacks on the twins, written after their code froze (issue 46 III): distinguishers that read the
copies' bodies.  Same measure as ``test_swe_twins_blind.py``: over the shipped deciding tests and 20 seeds
each, a distinguisher that names the real test well above a guess defeats the twins (a flip of that copy alone
is then never seen by them); those that do are kept as strict xfails with their figures.
"""

from __future__ import annotations

import ast
import re
from collections import Counter

import pytest

from tests.twin_draws import bodies as _bodies
from tests.twin_draws import parsed, twin_cases  # noqa: F401 (the session's draws, a fixture)


NEGATIVE = re.compile(r"!=|\bnot\b|NotEqual|IsNot|NotIn|assertFalse|NotIsInstance|NotRegex|NotAlmost")


def polarity(order, copies, old, text) -> int:
    """Real tests assert positively: the copy with the fewest negations and the most ``raises`` is real."""
    lines = text.splitlines()
    scores = []
    for func in _bodies(order, text):
        body = "\n".join(lines[func.lineno:func.end_lineno])
        scores.append(body.count("raises") - len(NEGATIVE.findall(body)))
    return max(range(len(order)), key=lambda i: scores[i])


def literal_counts(order, text) -> list[int] | None:
    """How often each copy's differing literal occurs elsewhere in the file (None: the copies differ in no literal,
    or in their literals' number)."""
    funcs = _bodies(order, text)
    consts = [[repr(n.value) for n in ast.walk(f) if isinstance(n, ast.Constant)] for f in funcs]
    inside = {id(n) for f in funcs for n in ast.walk(f)}
    counts = Counter(repr(n.value) for n in ast.walk(parsed(text)) if isinstance(n, ast.Constant)
                     and id(n) not in inside)
    if len({len(c) for c in consts}) != 1:
        return None
    differing = [i for i in range(len(consts[0])) if len({c[i] for c in consts}) > 1]
    if not differing:
        return None
    return [counts[c[differing[0]]] for c in consts]


def rarest_literal(order, copies, old, text) -> int:
    """Twins take their literal from elsewhere in the file: the copy whose differing literal is rarest there."""
    counts = literal_counts(order, text)
    return 0 if counts is None else min(range(len(order)), key=lambda i: counts[i])


HELD_OUT = {"polarity": polarity, "rarest_literal": rarest_literal}


WINS: dict[str, str] = {}
"""Was {"polarity": 345 of 460 (a guess: 207)}: a contradicting twin always carried the negation, or lost the
``raises``.  Since half the real tests are written as their twin's negation and a ``raises`` twin expects another
exception instead of running bare, it names the real test 169 times (225 when it breaks ties by the last copy)."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(HELD_OUT)])
def test_a_held_out_distinguisher_does_no_better_than_a_guess(name, twin_cases):
    found = twin_cases
    hits = sum(HELD_OUT[name](order, copies, old, text) == real for order, copies, real, old, text in found)
    chance = sum(1 / len(order) for order, *_ in found)
    assert hits <= chance * 1.25 + 10, (hits, round(chance), len(found))

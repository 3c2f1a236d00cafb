"""Held-out attacks on the twins, seventh set: written after the twins read the old test files (helper d, 2026-12-07,
frozen at f7a67cd, measured at a2e5537 (raw strings and floats written as repr in
every copy): a twin changes a statement the old file does not hold, its nearness to the old file's statements
ranked beside its counts), against what that is.  Each reads one copy per draw of the session's shared draws
(``tests/twin_draws.py``), measured per test function (``wins_per_test``: more than 1.5 x a guess + 4 of 40 draws on
one test wins); those that win are strict xfails with their figures.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import lru_cache

import pytest

from tests.test_swe_twins_heldout5 import _differing
from tests.twin_draws import bodies, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def _constants(line: str) -> list:
    try:
        tree = ast.parse(line.strip() + ("\n pass" if line.strip().endswith(":") else ""))
    except SyntaxError:
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]


def _differing_values(order, text) -> list | None:
    """Each copy's constant where the copies' differing lines differ first (None where none differs)."""
    lines = _differing(order, text)
    if lines is None:
        return None
    consts = [_constants(line) for line in lines]
    if len({len(c) for c in consts}) != 1:
        return None
    at = next((j for j in range(len(consts[0])) if len({repr(c[j]) for c in consts}) > 1), None)
    return None if at is None else [c[at] for c in consts]


def _numbers_in(text: str) -> set[float]:
    found = set()
    for token in re.findall(r"[-+]?(?:0[xob][0-9a-f]+|\d*\.?\d+(?:e[-+]?\d+)?|nan|inf)", text, re.I):
        for parse in (float, lambda t: float(int(t, 0))):
            try:
                found.add(parse(token))
            except ValueError:
                pass
    return found


def input_derived_literal(order, copies, old, text) -> int:
    """A test's expected value is often written in its own input (``"a 1.0E10 b"`` expects ``1.0e10``): the copy
    whose differing value is a number or a substring found in the other strings of its own line is real."""
    lines, values = _differing(order, text), _differing_values(order, text)
    if lines is None or values is None:
        return 0
    scores = []
    for line, value in zip(lines, values):
        others = [c for c in _constants(line) if isinstance(c, str) and c != value]
        hit = False
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            hit = any(float(value) in _numbers_in(s) for s in others)
        elif isinstance(value, str) and value:
            hit = any(value in s or s in value for s in others if s)
        scores.append(hit)
    return max(range(len(order)), key=lambda i: scores[i])


@lru_cache(maxsize=64)
def _old_values(old: str) -> Counter:
    try:
        tree = ast.parse(old)
    except SyntaxError:
        return Counter()
    return Counter(repr(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant))


def value_in_old_file(order, copies, old, text) -> int:
    """A new test reuses the old release's values: the copy whose differing value the old file holds most often."""
    values = _differing_values(order, text)
    if values is None or not old:
        return 0
    counts = _old_values(old)
    return max(range(len(order)), key=lambda i: counts[repr(values[i])])


def _tokens(line: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+|[^\w\s()'\"]", line.replace('"', "'")))


@lru_cache(maxsize=64)
def _old_token_sets(old: str) -> tuple[frozenset[str], ...]:
    return tuple({_tokens(row) for row in old.splitlines() if row.strip()})


def token_overlap_with_old(order, copies, old, text) -> int:
    """Words and symbols, not characters: the copy whose differing line shares the largest share of its tokens
    (Jaccard) with some line of the old file is real."""
    lines = _differing(order, text)
    if lines is None or not old:
        return 0
    olds = _old_token_sets(old)
    scores = []
    for line in lines:
        mine = _tokens(line)
        scores.append(max((len(mine & o) / len(mine | o) for o in olds if o), default=0.0))
    return max(range(len(order)), key=lambda i: scores[i])


def value_near_its_neighbours(order, copies, old, text) -> int:
    """A test's expected numbers sit near the other numbers of its body (a twin's is drawn from anywhere in the
    file): the copy whose differing number is nearest the median of its body's other numbers is real."""
    values = _differing_values(order, text)
    if values is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return 0
    funcs = bodies(order, text)
    scores = []
    for func, value in zip(funcs, values):
        others = sorted(n.value for n in ast.walk(func) if isinstance(n, ast.Constant)
                        and isinstance(n.value, (int, float)) and not isinstance(n.value, bool))
        others.remove(value)
        if not others:
            return 0
        median = others[len(others) // 2]
        scores.append(-abs(float(value) - float(median)))
    return max(range(len(order)), key=lambda i: scores[i])


HELD_OUT = {"input_derived_literal": input_derived_literal, "value_in_old_file": value_in_old_file,
            "token_overlap_with_old": token_overlap_with_old, "value_near_its_neighbours": value_near_its_neighbours}
WINS = {
    "input_derived_literal": "35 of 40 on test_numbers (a guess: 13.3): its changed statement is now a new "
                             "uppercase-E line whose expected float is written in its own input ('a 1.0E-10 b' "
                             "expects 1e-10); a twin's value is not",
    "token_overlap_with_old": "40 of 40 on test_ttl_copy and sqlparse's raises test, 39 on parse's time-zone test "
                              "(guesses 13.3-20): counted in tokens, a one-token change that a character measure "
                              "ranks evenly (0 or 1 beside 2) still leaves the real line sharing one token more with "
                              "an old line (the twin's value, message or operator is not in it)",
    "value_near_its_neighbours": "40 of 40 on test_ttl_copy (a guess: 13.3): the real timer() expects 2 among its "
                                 "body's 1s and 2s; a twin's 0 or 1 or a nudge sits further from the median",
}
"""Written after the freeze, against it; 3 of 4 win.  ``value_in_old_file`` (13 of 40 at worst, a guess 13.3) does
not."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(HELD_OUT)])
def test_a_seventh_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test(HELD_OUT[name], twin_cases) == []

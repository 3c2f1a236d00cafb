"""Held-out attacks on the twins, ninth set: written after helper d froze at 8ea1013 (session 37: where the copies
differ by a value, each copy reads it through a name drawn per grade, bound in lines laid last in the file), against
what that is.  Four read the file as laid in, binding lines included (``laid_cases``); two read it with the binding
lines cut (``bare_cases``: what a reader would see if the runners bound the names).  Each names one copy per draw of
the session's shared draws (``tests/twin_draws.py``), measured per test function (``wins_per_test``: more than
1.5 x a guess + 4 of 40 draws on one test wins); those that win are strict xfails with their figures.
"""

from __future__ import annotations

import ast
import re
from collections import Counter

import pytest

from tests.twin_draws import bare_cases, bodies, laid_cases, wins_per_test

BINDING = re.compile(r"^(_[a-z][a-z0-9]{5}) = (.+)$", re.M)


def _block(text: str) -> dict[str, str]:
    """The binding lines at the end of the laid-in file, name -> value source."""
    return dict(BINDING.findall(text))


def _bound(order, text) -> list[str] | None:
    """Each copy's one bound name (None: some copy reads no bound name, or more than one)."""
    block = _block(text)
    found = []
    for func in bodies(order, text):
        names = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and n.id in block}
        if len(names) != 1:
            return None
        found.append(names.pop())
    return found


def first_bound_name(order, copies, old, text) -> int:
    """The binding lines are sorted by name: the copy whose name sorts first is real (the real name drawn first)."""
    names = _bound(order, text)
    return 0 if names is None else min(range(len(order)), key=lambda i: names[i])


def value_shared_across_groups(order, copies, old, text) -> int:
    """Two tests of one file often expect the same value (one statement, two inputs), and a twin takes another of the
    file's values: the copy whose bound value is bound most often in the whole block, for any test, is real."""
    names = _bound(order, text)
    if names is None:
        return 0
    block = _block(text)
    counts = Counter(block.values())
    return max(range(len(order)), key=lambda i: counts[block[names[i]]])


def _number(source: str):
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return None
    return len(value) if isinstance(value, (str, bytes)) else value if isinstance(value, (int, float)) else None


def median_value(order, copies, old, text) -> int:
    """Nudges go both ways around the real literal: the copy whose bound value (a number, or a string's length) is
    the median of its copies' is real."""
    names = _bound(order, text)
    if names is None:
        return 0
    block = _block(text)
    values = [_number(block[n]) for n in names]
    if None in values:
        return 0
    ranked = sorted(range(len(order)), key=lambda i: values[i])
    return ranked[len(ranked) // 2]


def value_nearest_old_values(order, copies, old, text) -> int:
    """A fix changes few expectations: the copy whose bound value is nearest (as a number, or a string by difflib's
    measure) some value of its type the old test file holds is real."""
    import difflib

    names = _bound(order, text)
    if names is None:
        return 0
    block = _block(text)
    try:
        olds = [n.value for n in ast.walk(ast.parse(old)) if isinstance(n, ast.Constant)]
    except SyntaxError:
        return 0
    scores = []
    for name in names:
        try:
            value = ast.literal_eval(block[name])
        except (ValueError, SyntaxError):
            scores.append(0.0 if block[name] not in old else 1.0)
            continue
        same = [o for o in olds if type(o) is type(value)]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            scores.append(max((-abs(value - o) for o in same), default=float("-inf")))
        elif isinstance(value, str):
            scores.append(max((difflib.SequenceMatcher(None, value, o).ratio() for o in same), default=0.0))
        else:
            scores.append(0.0)
    return max(range(len(order)), key=lambda i: scores[i])


def name_in_parentheses_least(order, copies, old, text) -> int:
    """The real copy is respelled from the test as written, a twin from a changed line: the copy whose bound name
    stands bare (not inside redundant parentheses) is real."""
    rows = text.splitlines()
    scores = []
    for func in bodies(order, text):
        body = "\n".join(rows[func.lineno:func.end_lineno])
        scores.append(len(re.findall(r"\(\s*_[a-z][a-z0-9]{5}\s*\)", body)))
    return min(range(len(order)), key=lambda i: scores[i])


def differing_line_shape_in_old(order, copies, old, text) -> int:
    """With the name put back as ``X`` and spelling aside, the copy whose differing line's tree has the most
    statements of the old file of the same shape (the old file holds the real test's statement with its value) is
    real: each copy's other tokens (parentheses, quotes, operand order) are compared with the old file."""
    rows = text.splitlines()
    olds = Counter()
    for row in old.splitlines():
        code = row.strip()
        try:
            olds[ast.dump(ast.parse(re.sub(r"[\w.]+|'[^']*'|\"[^\"]*\"", "X", code)
                                    + ("\n pass" if code.endswith(":") else "")).body[0])] += 1
        except (SyntaxError, IndexError, ValueError):
            continue
    lines = []
    for func in bodies(order, text):
        body = [row.strip() for row in rows[func.lineno:func.end_lineno]]
        lines.append(body)
    if len({len(b) for b in lines}) != 1:
        return 0
    at = next((j for j in range(len(lines[0])) if len({b[j] for b in lines}) > 1), None)
    if at is None:
        return 0
    scores = []
    for body in lines:
        code = body[at]
        try:
            tree = ast.dump(ast.parse(re.sub(r"[\w.]+|'[^']*'|\"[^\"]*\"", "X", code)
                                      + ("\n pass" if code.endswith(":") else "")).body[0])
        except (SyntaxError, IndexError, ValueError):
            tree = ""
        scores.append(olds[tree])
    return max(range(len(order)), key=lambda i: scores[i])


LAID = {"first_bound_name": first_bound_name, "value_shared_across_groups": value_shared_across_groups,
        "median_value": median_value, "value_nearest_old_values": value_nearest_old_values}
BARE = {"name_in_parentheses_least": name_in_parentheses_least,
        "differing_line_shape_in_old": differing_line_shape_in_old}
WINS = {
    "median_value": "40 of 40 on sqlparse's grouping-limits test (a guess: 20; its two copies' messages differ in "
                    "length, the real one longer: with two copies the median is the longer), 27 of 40 on "
                    "test_ttl_copy and one more test of three copies (the line 24): nudges straddle the real literal",
    "value_nearest_old_values": "40 of 40 on sqlparse's grouping-limits test (a guess: 20): the real message is "
                                "nearer a string the old test file holds than the twin's",
}
"""Run once after the freeze (640 draws, load 5-6): 2 of 6 win, both reading the binding lines, i.e. the values as
the copies showed them before the bindings; the same readings on the file with the lines cut have nothing to read.
The name first in sort order (22 of 40), the value bound most often in the block (25), the name left bare of
parentheses (24) and the differing line's shape in the old file (25) do not win (a guess 20, the line 34)."""


@pytest.fixture(scope="module")
def views():
    return {"laid": laid_cases(), "bare": bare_cases()}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted({**LAID, **BARE})])
def test_a_ninth_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, views):
    found = views["laid"] if name in LAID else views["bare"]
    assert wins_per_test({**LAID, **BARE}[name], found) == []

"""Held-out attacks on the twins, sixth set: written after the real copy was respelled too and literal twins kept the
claim's shape (helper d, 2026-12-07, frozen at 1152894), against what that is.  Each reads one copy per draw of the
session's shared draws (``tests/twin_draws.py``), measured per test function (``wins_per_test``: more than 1.5 x a
guess + 4 of 40 draws on one test wins); those that win are strict xfails with their figures.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from functools import lru_cache

import pytest

from tests.test_swe_twins_heldout5 import _differing
from tests.twin_draws import bodies, parsed, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def fewest_pairs(order, copies, old, text) -> int:
    """The grader pads twins to hide a length: the copy with the fewest doubled or redundant parentheses is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    marks = [len(re.findall(r"\(\(|\)\)|\((\w+)\)|\(\"[^\"]*\"\)|\('[^']*'\)", line)) for line in lines]
    return min(range(len(order)), key=lambda i: marks[i])


def _literal_side(line: str) -> str | None:
    """'left' or 'right': where a comparison or a two-argument assertion of ``line`` puts its literal."""
    try:
        stmt = ast.parse(line.strip() + ("\n pass" if line.strip().endswith(":") else "")).body[0]
    except (SyntaxError, IndexError):
        return None
    pair = None
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1:
        pair = stmt.test.left, stmt.test.comparators[0]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and len(stmt.value.args) == 2:
        pair = tuple(stmt.value.args)
    if pair is None or isinstance(pair[0], ast.Constant) == isinstance(pair[1], ast.Constant):
        return None
    return "left" if isinstance(pair[0], ast.Constant) else "right"


def operand_habit(order, copies, old, text) -> int:
    """A file puts its expected literal on one side (``assertEqual(1, x)``, ``assert x == 1``): the copy whose literal
    stands where the rest of the file puts it is real (the grader swaps operands at random)."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    inside = {n for f in bodies(order, text) for n in range(f.lineno, f.end_lineno + 1)}
    habit = Counter(side for n, row in enumerate(text.splitlines(), 1) if n not in inside
                    for side in [_literal_side(row)] if side)
    if not habit:
        return 0
    usual = habit.most_common(1)[0][0]
    return max(range(len(order)), key=lambda i: _literal_side(lines[i]) == usual)


def literal_in_own_body(order, copies, old, text) -> int:
    """A test's expected values recur in its own body (inputs, other assertions): the copy whose differing literal
    stands elsewhere in its own body most often is real."""
    funcs = bodies(order, text)
    consts = [[n for n in ast.walk(f) if isinstance(n, ast.Constant)] for f in funcs]
    if len({len(c) for c in consts}) != 1:
        return 0
    at = next((j for j in range(len(consts[0])) if len({repr(c[j].value) for c in consts}) > 1), None)
    if at is None:
        return 0
    scores = [sum(repr(n.value) == repr(c[at].value) for j, n in enumerate(c) if j != at) for c in consts]
    return max(range(len(order)), key=lambda i: scores[i])


def _tree(line: str) -> str:
    code = line.strip()
    try:
        return ast.dump(ast.parse(code + ("\n pass" if code.endswith(":") else "")).body[0])
    except (SyntaxError, IndexError):
        return code


@lru_cache(maxsize=64)
def _old_trees(old: str) -> tuple[str, ...]:
    return tuple(sorted({_tree(row) for row in old.splitlines() if row.strip()}))


def nearest_tree_in_old_file(order, copies, old, text) -> int:
    """The copy whose differing statement's syntax tree is most like (difflib) some statement of the old file."""
    lines = _differing(order, text)
    if lines is None or not old:
        return 0
    scores = [_nearest(_tree(line), old) for line in lines]
    return max(range(len(order)), key=lambda i: scores[i])


@lru_cache(maxsize=4096)
def _nearest(mine: str, old: str) -> float:
    """(A respelled line parses to one of a few trees per test: each is measured once per session.)"""
    matcher = difflib.SequenceMatcher(None, b=mine, autojunk=False)
    best = 0.0
    kind = mine[:mine.find("(")]
    for other in _old_trees(old):
        if not other.startswith(kind):  # an assert is likest an assert: the others only cost time
            continue
        matcher.set_seq1(other)
        if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
            best = max(best, matcher.ratio())
    return best


def likest_line_in_the_file(order, copies, old, text) -> int:
    """Tests are pasted from their neighbours: the copy whose differing line, parentheses and quotes aside, is most
    like some other line of the laid-in file (outside the copies) is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    inside = {n for f in bodies(order, text) for n in range(f.lineno, f.end_lineno + 1)}
    plain = [re.sub(r"[()\s]", "", row).replace('"', "'") for n, row in enumerate(text.splitlines(), 1)
             if n not in inside and row.strip()]
    scores = []
    for line in lines:
        mine = re.sub(r"[()\s]", "", line).replace('"', "'")
        scores.append(max((difflib.SequenceMatcher(None, mine, other).quick_ratio() for other in plain), default=0))
    return max(range(len(order)), key=lambda i: scores[i])


HELD_OUT = {"fewest_pairs": fewest_pairs, "operand_habit": operand_habit, "literal_in_own_body": literal_in_own_body,
            "nearest_tree_in_old_file": nearest_tree_in_old_file, "likest_line_in_the_file": likest_line_in_the_file}
WINS = {
    "likest_line_in_the_file": "40 of 40 on test_ttl_copy, 37-38 on test_numbered-like neighbours and sqlparse's "
                               "isinstance test, 35 and 38 on two more (guesses 13.3-20): parentheses and quotes "
                               "aside, the real line is most like some other line of the file (tests are pasted "
                               "from their neighbours); a twin's changed token is less usual there",
    "nearest_tree_in_old_file": "40 of 40 on parse's test_datetime_inside_field_name (a guess: 20), read with the "
                                "values known (cases()): since d3 binds its operator (session 38) no copy is "
                                "written as the negation of its twin, so the real claim, resolved, is the old "
                                "file's; on the files as shipped every copy reads _k(a, b): 24 of 40 at worst",
}
"""Measured after the freeze at 1152894 on the shared draws (560 draws), load 20-26: three of five won
(``literal_in_own_body`` 27 of 40 on test_numbers, a guess 13.3).  With the old files read (640 draws: two tests of
test_keys.py had been counted as one), ``literal_in_own_body`` 24 of 40 at worst (a guess 20, the line 34) no longer
wins; ``fewest_pairs`` 18 of 40 (13.3) and ``operand_habit`` 21 (13.3) do not.  ``nearest_tree_in_old_file`` won 40
of 40 on four tests at 1152894, then 40 on the time-zone raises test and 38-40 on sqlparse's isinstance test until a
raises twin could take any unrelated built-in exception the file or the old file names and an isinstance twin any
disjoint type, ranked by nearness (f5f3d97), then 25 of 40 on test_ttl_copy (a guess 13.3, the line 24), where no
literal a twin takes is nearer an old statement than the real 2.  Since the bindings (session 37) drew differently:
32 of 40 at worst (a guess 20, the line 34), test_ttl_copy at or under its line 24; nothing was designed against
it, it moves with the draws around the line."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(HELD_OUT)])
def test_a_sixth_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test(HELD_OUT[name], twin_cases) == []

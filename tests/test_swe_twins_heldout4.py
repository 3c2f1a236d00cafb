"""Held-out attacks on the twins, fourth set: written after issue 46 graders III froze (nudges in a chain either way,
twin names balanced by how their words read in the body, redundant parentheses that rank the real copy's length
anywhere, no twin named like a test its class inherits).  Each reads one copy per draw and is measured per test
function (``wins_per_test``: more than 1.5 x a guess + 4 of 40 draws on one test wins); those that win stay strict
xfails with their figures.
"""

from __future__ import annotations

import ast
import re
import statistics

import pytest

from tests.test_swe_twins_heldout import _bodies
from tests.twin_draws import parsed, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def _others(order, text) -> list[str]:
    """The file's test names that are none of the copies."""
    return [f.name for f in ast.walk(parsed(text)) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and f.name.startswith("test") and f.name not in order]


def longest_name_in_letters(order, copies, old, text) -> int:
    """A drawn name swaps one word for another of the file's: counted in letters, not words, the real one is longer."""
    return max(range(len(order)), key=lambda i: len(order[i]))


def name_pairs_seen(order, copies, old, text) -> int:
    """A real name's consecutive word pairs are the file's habits (``copy_attributes``, ``split_begin``); a drawn name
    makes new pairs where it swapped a word: the copy whose pairs stand most in the file's other names is real."""
    pairs = [p for name in _others(order, text) for p in zip(name.split("_")[1:], name.split("_")[2:])]
    scores = [sum(pairs.count(p) for p in zip(n.split("_")[1:], n.split("_")[2:])) for n in order]
    return max(range(len(order)), key=lambda i: scores[i])


def neighbour_words(order, copies, old, text) -> int:
    """Tests sit beside tests about the same thing: the copy sharing most name words with the tests right above and
    below it (none of the copies) is real."""
    funcs = sorted((f.lineno, f.name) for f in ast.walk(parsed(text)) if isinstance(f, ast.FunctionDef)
                   and f.name.startswith("test"))
    names = [n for _, n in funcs]
    scores = []
    for name in order:
        at = names.index(name)
        around = [n for n in names[max(0, at - 2):at + 3] if n not in order]
        scores.append(sum(len(set(name.split("_")[1:]) & set(n.split("_")[1:])) for n in around))
    return max(range(len(order)), key=lambda i: scores[i])


def typical_literal_size(order, copies, old, text) -> int:
    """The differing literal closest in written size to the file's median literal is real (a twin's is drawn)."""
    funcs = _bodies(order, text)
    consts = [[n for n in ast.walk(f) if isinstance(n, ast.Constant)] for f in funcs]
    if len({len(c) for c in consts}) != 1:
        return 0
    differing = [i for i in range(len(consts[0])) if len({repr(c[i].value) for c in consts}) > 1]
    if not differing:
        return 0
    sizes = [len(repr(n.value)) for n in ast.walk(parsed(text)) if isinstance(n, ast.Constant)]
    middle = statistics.median(sizes)
    return min(range(len(order)), key=lambda i: abs(len(repr(consts[i][differing[0]].value)) - middle))


def stripped_length(order, copies, old, text) -> int:
    """Parentheses and spaces removed (the padding a grader could add), the longest copy is real (``==`` against
    ``<``).  Thought of while building the padding: measured beside the held-out ones, not counted among them."""
    lines = text.splitlines()
    sizes = [len(re.sub(r"[()\s]", "", "\n".join(lines[f.lineno:f.end_lineno]))) for f in _bodies(order, text)]
    return max(range(len(order)), key=lambda i: sizes[i])


HELD_OUT = {"longest_name_in_letters": longest_name_in_letters, "name_pairs_seen": name_pairs_seen,
            "neighbour_words": neighbour_words, "typical_literal_size": typical_literal_size}
BUILT_WITH = {"stripped_length": stripped_length}
WINS = {
    "typical_literal_size": "40 of 40 on sqlparse's raises test test_normal_sql_still_nested (a guess: 20): its only "
                            "twin takes the file's one other match= message; the two tests of that file had been "
                            "counted as one (the shared draws keyed a test by its drawn name) and hid it",
    "neighbour_words": "35-36 of 40 on cachetools' test_copy_attributes (a guess: 13.3): an inherited test keeps its "
                       "own name, and the mixin's tests beside it share its words; a drawn twin name is placed "
                       "anywhere, among tests about other things",
    "stripped_length": "40 of 40 on two tests (a guess: 20): with parentheses and spaces removed, == is still a "
                       "character longer than a twin's < on parse's time-zone test (no literal: its twin claims < "
                       "or >), and sqlparse's two match= messages differ in length (thought of while building the "
                       "padding, which only defeats a reader that counts them)",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted({**HELD_OUT, **BUILT_WITH})])
def test_a_fourth_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test({**HELD_OUT, **BUILT_WITH}[name], twin_cases) == []

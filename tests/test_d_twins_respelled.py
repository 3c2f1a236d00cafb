"""The real copy respelled too (issue 46, graders III, helper d): readings of "what the original looks like".

The real deciding test used to be the original text and each twin an edit of it, so any reading of what the original
looks like (the old test file the policy saw, the file's habits, equality) named it.  Written before the fix, on the
session's shared draws (``tests/twin_draws.py``), per test function (``wins_per_test``): the differing line read with
its redundant parentheses, spaces and quotes taken away, and the differing statement's syntax tree, each looked up
in the old test file.  They still won after it: the real copy is respelled by rewrites a reader can undo, and no
twin's changed line stands in the old file.  They ended when twins changed a statement the old file does not hold.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

import pytest

from tests.test_swe_twins_heldout5 import _differing
from tests.twin_draws import twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def _plain(line: str) -> str:
    return re.sub(r"[()\s]", "", line).replace('"', "'")


@lru_cache(maxsize=64)
def _old_plain(old: str) -> frozenset[str]:
    return frozenset(_plain(row) for row in old.splitlines())


def plain_line_in_old_file(order, copies, old, text) -> int:
    """Parentheses, spaces and quote style taken away (a respelling a grader can add), the copy whose differing line
    stands in the old test file is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    seen = _old_plain(old)
    return max(range(len(order)), key=lambda i: _plain(lines[i]) in seen)


def _tree(line: str) -> str | None:
    code = line.strip()
    try:
        return ast.dump(ast.parse(code + ("\n pass" if code.endswith(":") else "")).body[0])
    except (SyntaxError, IndexError):
        return None


@lru_cache(maxsize=64)
def _old_trees(old: str) -> frozenset[str]:
    return frozenset(t for row in old.splitlines() if (t := _tree(row)) is not None)


def tree_in_old_file(order, copies, old, text) -> int:
    """The copy whose differing statement parses to a statement of the old test file (what any spelling of the same
    code parses to) is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    seen = _old_trees(old)
    return max(range(len(order)), key=lambda i: _tree(lines[i]) in seen)


READINGS = {"plain_line_in_old_file": plain_line_in_old_file, "tree_in_old_file": tree_in_old_file}
WINS: dict[str, str] = {}
"""Before the real copy was respelled: 40 of 40 on test_style and test_numbers each (a guess: 13.3), 30 on
test_methodkey (20); after the respelling, still 40 of 40 on test_numbers (both) and test_numbered (the tree), 35 on
test_methodkey.  Since ``make_twins`` reads the old test files (``swe_env/grade.py`` passes the repo the policy saw)
and changes a statement they do not hold: 19 of 40 at worst (a guess 13.3, the line 24), both, on 640 draws."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(READINGS)])
def test_the_old_file_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test(READINGS[name], twin_cases) == []

"""Held-out attacks on the twins, fifth set: written after issue 46's twin code froze again this session (the draws
unchanged, only made faster and shared), against what it is.  Each reads one copy per draw of the session's shared
draws (``tests/twin_draws.py``) and is measured per test function (``wins_per_test``: more than 1.5 x a guess + 4 of
40 draws on one test wins); those that win are strict xfails with their figures.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from functools import lru_cache

import pytest

from tests.twin_draws import bodies, parsed, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def _lines(order, text) -> list[list[str]]:
    rows = text.splitlines()
    return [[row.strip() for row in rows[f.lineno:f.end_lineno]] for f in bodies(order, text)]


def _differing(order, text) -> list[str] | None:
    """Each copy's first line where the copies differ (None: the copies have different lengths or never differ)."""
    copies = _lines(order, text)
    if len({len(c) for c in copies}) != 1:
        return None
    at = next((j for j in range(len(copies[0])) if len({c[j] for c in copies}) > 1), None)
    return None if at is None else [c[at] for c in copies]


def line_in_old_file(order, copies, old, text) -> int:
    """The policy's own (older) test file often holds the real test's lines already, a twin's changed line never: the
    copy whose differing line stands in the old test file is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    seen = {row.strip() for row in old.splitlines()}
    return max(range(len(order)), key=lambda i: lines[i] in seen)


@lru_cache(maxsize=64)
def _old_tests(old: str) -> tuple[difflib.SequenceMatcher, ...]:
    """A matcher per test function of the old file, its side set once (the old file is the same for 40 draws)."""
    try:
        tree = parsed(old)
    except SyntaxError:
        return ()
    rows = old.splitlines()
    return tuple(difflib.SequenceMatcher(None, b="\n".join(r.strip() for r in rows[f.lineno:f.end_lineno]),
                                         autojunk=False)
                 for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name.startswith("test"))


def closest_to_old(order, copies, old, text) -> int:
    """The copy most like some test of the old file (difflib's quick ratio over the bodies) is real: a new test is
    an old one edited, a twin is a further edit of it."""
    olds = _old_tests(old) if old else ()
    if not olds:
        return 0
    score = []
    for body in _lines(order, text):
        best = 0.0
        for matcher in olds:
            matcher.set_seq1("\n".join(body))
            if matcher.real_quick_ratio() > best:  # an upper bound of quick_ratio, from the lengths alone
                best = max(best, matcher.quick_ratio())
        score.append(best)
    return max(range(len(order)), key=lambda i: score[i])


EQUALITY = re.compile(r"==|assertEqual\(|assertIs\(|assertIn\(|assertTrue\(|\bis\b(?!\s+not)|(?<!not )\bin\b")
DOUBLE = [(re.compile(r"not \((.*) != (.*)\)"), r"\1 == \2"),
          (re.compile(r"assertFalse\((.*) != (.*)\)"), r"assertEqual(\1, \2)"),
          (re.compile(r"not \((.*) is not (.*)\)"), r"\1 is \2"),
          (re.compile(r"not \((.*) not in (.*)\)"), r"\1 in \2")]


def semantic_equality(order, copies, old, text) -> int:
    """Read through the mirrors (``not (a != b)`` is ``a == b``): the copy whose differing line then claims an
    equality, identity or membership, and no negation, is real (tests claim what holds; twins claim < or !=)."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    scores = []
    for line in lines:
        line = re.sub(r"\(\(([^()]*)\)\)", r"(\1)", line)
        for pattern, plain in DOUBLE:
            line = pattern.sub(plain, line)
        scores.append(bool(EQUALITY.search(line)) - len(re.findall(r"!=|\bnot\b|NotEqual|assertFalse|<|>", line)))
    return max(range(len(order)), key=lambda i: scores[i])


OPERATORS = re.compile(r"==|!=|<=|>=|(?<![-=])<(?!=)|(?<![-=])>(?!=)|\bis not\b|\bnot in\b|assert[A-Z]\w*")


def file_operator_frequency(order, copies, old, text) -> int:
    """The copy whose differing line uses the operator (or assertion method) the rest of the file uses most is real:
    a file's tests share its habits, a twin's operator is drawn."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    inside = {n for f in bodies(order, text) for n in range(f.lineno, f.end_lineno + 1)}
    habits = Counter(op for n, row in enumerate(text.splitlines(), 1) if n not in inside
                     for op in OPERATORS.findall(row))
    scores = [sum(habits[op] for op in OPERATORS.findall(line)) for line in lines]
    return max(range(len(order)), key=lambda i: scores[i])


def canonical_literal(order, copies, old, text) -> int:
    """A grader writes a literal as ``repr`` would; people write ``1_000``, ``0x10``, ``"a" "b"`` or escapes their own
    way: the copy whose differing literal is written other than its ``repr`` is real (else the first)."""
    funcs = bodies(order, text)
    rows = text.splitlines()
    consts = [[n for n in ast.walk(f) if isinstance(n, ast.Constant) and n.lineno == n.end_lineno] for f in funcs]
    if len({len(c) for c in consts}) != 1:
        return 0
    at = next((j for j in range(len(consts[0])) if len({repr(c[j].value) for c in consts}) > 1), None)
    if at is None:
        return 0
    written = [rows[c[at].lineno - 1].encode()[c[at].col_offset:c[at].end_col_offset].decode() for c in consts]
    odd = [w.strip("'\"") != repr(c[at].value).strip("'\"") for w, c in zip(written, consts)]
    return odd.index(True) if odd.count(True) == 1 else 0


def quote_majority(order, copies, old, text) -> int:
    """The copy whose differing line's quotes are the file's commoner quote is real."""
    lines = _differing(order, text)
    if lines is None:
        return 0
    single, double = text.count("'"), text.count('"')
    commoner = "'" if single >= double else '"'
    scores = [line.count(commoner) - line.count('"' if commoner == "'" else "'") for line in lines]
    return max(range(len(order)), key=lambda i: scores[i])


HELD_OUT = {"line_in_old_file": line_in_old_file, "closest_to_old": closest_to_old,
            "semantic_equality": semantic_equality, "file_operator_frequency": file_operator_frequency,
            "canonical_literal": canonical_literal, "quote_majority": quote_majority}
WINS = {
    "closest_to_old": "40 of 40 on parse's time-zone test (a guess: 20): the real copy is nearer (difflib) to some "
                      "test of the old file than its twin, which claims < or > where the real one says ==",
    "semantic_equality": "40 of 40 on test_that (a guess: 20): read through the mirrors (not (a != b) is a == b), "
                         "only the real copy claims an equality; a twin of an equality with no literal claims < or >",
    "file_operator_frequency": "40 of 40 on parse's time-zone test (a guess: 20): the real copy's operator (==) is "
                               "the one the rest of the file uses most",
}
"""Measured on the shared draws at 1b8436a: five of six won; ``quote_majority`` did not (16 of 40 at worst, a guess
13.3).  Since the real copy is respelled too and literal twins keep the claim's shape (helper d, 2026-12-07):
``line_in_old_file`` 33 -> 17 of 40, ``canonical_literal`` 34 -> 17, ``closest_to_old`` 37-40 -> under the line but on
the one test without a literal, where ``file_operator_frequency`` (40 of 40 on two tests before) and
``semantic_equality`` still win: a twin of ``a == b`` with no literal must claim something no program meets beside
it, so it never claims equality."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(HELD_OUT)])
def test_a_fifth_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test(HELD_OUT[name], twin_cases) == []

"""Held-out attacks on the twins, third set: written after the per-test balancing froze (issue 46, item 3), against
what it is (twins claim positively at the file's rate, take lines and literals as common as the real copy's).

Each reads one copy per draw, as ``test_swe_twins_blind.py``'s do, and is measured per test function (40 draws):
a reading that names the real copy of one test in most of its draws lets a flip aimed at that test alone pass.
Those that do stay strict xfails with their figures.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.test_swe_twins_heldout import _bodies
from tests.twin_draws import parsed, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)


def _texts(order, text) -> list[str]:
    lines = text.splitlines()
    return ["\n".join(lines[f.lineno - 1:f.end_lineno]) for f in _bodies(order, text)]


def name_words_in_body(order, copies, old, text) -> int:
    """A test is named for what it does: the copy whose name's words occur most in its own body is real."""
    scores = []
    for name, body in zip(order, _texts(order, text)):
        rest = body.split("\n", 1)[-1].lower()
        scores.append(sum(1 for w in name.split("_")[1:] if len(w) > 2 and w.lower() in rest))
    return max(range(len(order)), key=lambda i: scores[i])


def shortest_body(order, copies, old, text) -> int:
    """Twins add text (a mirror's ``not (...)``, a longer literal): the shortest copy is real."""
    sizes = [len(b.split("\n", 1)[-1]) for b in _texts(order, text)]
    return min(range(len(order)), key=lambda i: sizes[i])


def longest_body(order, copies, old, text) -> int:
    sizes = [len(b.split("\n", 1)[-1]) for b in _texts(order, text)]
    return max(range(len(order)), key=lambda i: sizes[i])


def within_the_line_limit(order, copies, old, text) -> int:
    """A project keeps its lines under a limit its linter enforces; a copy with a line longer than any line outside
    the copies was written by the grader: the first copy that keeps within the file's longest line is real."""
    bodies = _bodies(order, text)
    lines = text.splitlines()
    inside = {n for f in bodies for n in range(f.lineno, f.end_lineno + 1)}
    limit = max((len(line) for n, line in enumerate(lines, 1) if n not in inside), default=0)
    fits = [max(len(line) for line in lines[f.lineno - 1:f.end_lineno]) <= limit for f in bodies]
    return fits.index(True) if fits.count(True) == 1 else 0


def redundant_parentheses(order, copies, old, text) -> int:
    """People do not write ``assertFalse((a) != (b))`` or ``not (a != b)``: a copy with such a form is machine
    written, and the mirror is only ever written into the real test."""
    marks = [len(re.findall(r"\(\(|not \(", body.split("\n", 1)[-1])) for body in _texts(order, text)]
    return max(range(len(order)), key=lambda i: marks[i])


def nudge_base(order, copies, old, text) -> int:
    """A twin's literal may be the real one with a character added or a small number added: the copy whose literal
    another copy's literal extends is real."""
    funcs = _bodies(order, text)
    consts = [[n.value for n in ast.walk(f) if isinstance(n, ast.Constant)] for f in funcs]
    if len({len(c) for c in consts}) != 1:
        return 0
    for at in range(len(consts[0])):
        values = [c[at] for c in consts]
        if len(set(map(repr, values))) == 1:
            continue
        for i, v in enumerate(values):
            for w in values:
                if type(v) is type(w) and v != w and (
                        isinstance(v, (str, bytes)) and w[:-1] == v
                        or isinstance(v, int) and not isinstance(v, bool) and 0 < w - v <= 9):
                    return i
        return 0
    return 0


def spacing(order, copies, old, text) -> int:
    """Blank lines above and below each copy: the copy spaced as the file spaces its other tests is real."""
    lines = text.splitlines()
    bodies = _bodies(order, text)

    def around(f: ast.FunctionDef) -> tuple[int, int]:
        top = min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 2
        above = 0
        while top - above >= 0 and not lines[top - above].strip():
            above += 1
        below = 0
        while f.end_lineno + below < len(lines) and not lines[f.end_lineno + below].strip():
            below += 1
        return above, below
    everyone = [around(f) for f in ast.walk(parsed(text)) if isinstance(f, ast.FunctionDef)
                and f.name.startswith("test") and f.name not in order]
    if not everyone:
        return 0
    usual = max(set(everyone), key=everyone.count)
    mine = [around(f) for f in bodies]
    return next((i for i, s in enumerate(mine) if s == usual), 0)


HELD_OUT = {"name_words_in_body": name_words_in_body, "shortest_body": shortest_body, "longest_body": longest_body,
            "within_the_line_limit": within_the_line_limit, "redundant_parentheses": redundant_parentheses,
            "nudge_base": nudge_base, "spacing": spacing}
WINS: dict[str, str] = {}
"""Was (helper d, session 36): "name_words_in_body" 27 of 40 on cachetools' inherited test_copy_attributes (a guess:
13.3, the line 24; 24 before the old files were read).  Since the bindings (session 37) drew differently: 24 of 40,
on the line, not over it.  Nothing was designed against it: it moves with the draws around the line.
Was also (main 2c6183c): "name_words_in_body" 38 of 40 on cachetools' test_copy_attributes, "nudge_base" 26 of 40
on parse's microsecond test, and the two body lengths on five tests.  Twin names are now drawn so that how many of
their words the body holds ranks the real name anywhere (24 of 40, a guess 13.3: under the line), nudges go both
ways (17 of 40), and every copy of a group whose differing line stands nowhere else is padded with redundant
parentheses so that the real copy's length ranks anywhere (``execution/twin_spelling.py``).  Until the real copy was
respelled too (helper d, 2026-12-07): "shortest_body" 35-37 of 40 on parse's timezone-minutes raises test (its line
stood elsewhere in the file and went unpadded; a twin's exception named longer) and "longest_body" 40 of 40 on
sqlparse's raises test; now every copy's differing line is respelled and a raises twin's exception is named about
as long as the real one's: 23 and 16 of 40 at worst (a guess 13.3)."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(HELD_OUT)])
def test_a_third_held_out_reading_names_the_real_copy_of_no_test_in_most_of_its_draws(name, twin_cases):
    assert wins_per_test(HELD_OUT[name], twin_cases) == []

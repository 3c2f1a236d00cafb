"""Attacks that know the twin scheme and try to tell the real deciding test from its copies (issue 46 III, item 3).

Each distinguisher sees what code under test can see at run time: the graded test file as laid in (it can
read it), the collected names, their order, and the test file the policy was shown (the old release's).  It
names one copy as the real test; over the shipped tasks' deciding tests and 20 secret seeds each, it must do
no better than a fair guess by more than a margin: a flip of that one copy alone would otherwise beat the twins.
"""

from __future__ import annotations

import re

import pytest

from tests.twin_draws import SEEDS, cases, twin_cases  # noqa: F401 (SEEDS and cases read by the other files)


def _neighbours(name: str, others: set[str]) -> bool:
    words = name.split("_")
    return any(len(o.split("_")) == len(words) and sum(a != b for a, b in zip(o.split("_"), words)) == 1
               for o in others)


DISTINGUISHERS = {
    "first_in_file": lambda order, copies, old, text: 0,
    "last_in_file": lambda order, copies, old, text: len(order) - 1,
    "longest_name": lambda order, copies, old, text: max(range(len(order)), key=lambda i: len(order[i].split("_"))),
    "name_in_the_old_test_file": lambda order, copies, old, text: next(
        (i for i, n in enumerate(order) if re.search(rf"\bdef {n}\b", old)), 0),
    "no_one_word_neighbour": lambda order, copies, old, text: next(
        (i for i, n in enumerate(order) if not _neighbours(n, set(re.findall(r"def (test\w*)", text)) - set(order))),
        0),
    "comment_above": lambda order, copies, old, text: next(
        (i for i, c in enumerate(copies) if c[2].strip().startswith("#")), 0),
}


@pytest.mark.parametrize("name", sorted(DISTINGUISHERS))
def test_a_distinguisher_does_no_better_than_a_guess(name, twin_cases):
    pick = DISTINGUISHERS[name]
    found = twin_cases
    assert len(found) >= 100
    hits = sum(pick(order, copies, old, text) == real for order, copies, real, old, text in found)
    chance = sum(1 / len(order) for order, *_ in found)
    assert hits <= chance * 1.25 + 10, (hits, round(chance), len(found))

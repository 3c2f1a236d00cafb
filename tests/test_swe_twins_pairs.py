"""Issue 46 graders III, item 2: attacks on the twins that need not tell the copies apart, written before any fix.

- **Flip a near-identical group.** A twin that is its test's exact negation (``a != b`` beside ``a == b``,
  ``assertNotIn`` beside ``assertIn``, ``not x`` beside ``x``) has the opposite outcome for every program.  A flip of
  every outcome of every group of copies that differ in one token turns a wrong patch's picture (test failed, twin
  passed) into a right one's (test passed, twin failed) without knowing which copy is real; the twins see nothing.
  It wins a draw when every must-fail twin of the test is such a negation.
- **Operator prior.** Tests mostly claim equality: the copy whose differing line says ``==`` or ``assertEqual`` is
  real, whatever the twin claims instead (``<``, ``>``, ``!=``).

Both measured per test function over the shipped tasks' draws (``tests/test_swe_twins_blind.py``'s cases).
"""

from __future__ import annotations

import ast

import pytest

from tests.test_swe_twins_heldout import _bodies
from tests.twin_draws import SEEDS, twin_cases, wins_per_test  # noqa: F401 (the session's draws, a fixture)

OPPOSITE = {"assertEqual": "assertNotEqual", "assertTrue": "assertFalse", "assertIs": "assertIsNot",
            "assertIn": "assertNotIn", "assertIsNone": "assertIsNotNone", "assertIsInstance": "assertNotIsInstance",
            "assertRegex": "assertNotRegex", "assertAlmostEqual": "assertNotAlmostEqual"}
OPPOSITE |= {b: a for a, b in OPPOSITE.items()}
OPPOSITE_OPS = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
                ast.IsNot: ast.Is, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}


def _claim(stmt: ast.stmt) -> tuple[bool, ast.expr] | None:
    """(positive?, expression) a statement asserts: ``assert x`` -> x, ``self.assertFalse(x)`` -> not x,
    ``self.assertNotEqual(a, b)`` -> a != b, as plain expressions; None for any other statement."""
    if isinstance(stmt, ast.Assert):
        return True, stmt.test
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func,
                                                                                            ast.Attribute)):
        return None
    name, args = stmt.value.func.attr, stmt.value.args
    if name in ("assertTrue", "assertFalse") and len(args) == 1:
        return name == "assertTrue", args[0]
    ops = {"assertEqual": ast.Eq, "assertNotEqual": ast.NotEq, "assertIn": ast.In, "assertNotIn": ast.NotIn,
           "assertIs": ast.Is, "assertIsNot": ast.IsNot}
    if name in ops and len(args) == 2:
        return True, ast.Compare(args[0], [ops[name]()], [args[1]])
    return None


def _negation(a: ast.expr, b: ast.expr) -> bool:
    """``b`` is ``not a`` in one of the spellings a twin or a mirrored test uses."""
    if isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.Not) and ast.dump(b.operand) == ast.dump(a):
        return True
    if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.Not) and ast.dump(a.operand) == ast.dump(b):
        return True
    if isinstance(a, ast.Compare) and isinstance(b, ast.Compare) and len(a.ops) == len(b.ops) == 1 \
            and OPPOSITE_OPS.get(type(a.ops[0])) is type(b.ops[0]):
        return ast.dump(a.left) == ast.dump(b.left) and ast.dump(a.comparators[0]) == ast.dump(b.comparators[0])
    return False


def complement(real: ast.FunctionDef, twin: ast.FunctionDef) -> bool:
    """The twin's outcome is the real test's opposite for every program: their bodies differ in one statement, and
    the twin's claim there is the real one's negation."""
    if len(real.body) != len(twin.body):
        return False
    differ = [(a, b) for a, b in zip(real.body, twin.body) if ast.dump(a) != ast.dump(b)]
    if len(differ) != 1:
        return False
    ours, theirs = _claim(differ[0][0]), _claim(differ[0][1])
    if ours is None or theirs is None:
        return False
    if ours[0] == theirs[0]:
        return _negation(ours[1], theirs[1])
    return ast.dump(ours[1]) == ast.dump(theirs[1])  # assertTrue(x) beside assertFalse(x)


def flip_the_group(order, copies, real, text) -> bool:
    """The flip of every copy's outcome goes unseen in this draw: every must-fail twin is a complement."""
    bodies = _bodies(order, text)
    twins = [f for i, f in enumerate(bodies) if i != real]
    return bool(twins) and all(complement(bodies[real], f) for f in twins)


@pytest.mark.xfail(strict=True, reason="attack: 59 of 560 draws (14 tests x 40; 63 of 520 before the real copy was "
                   "respelled) leave a test whose only must-fail twin is the real claim's negation (a != b, "
                   "assertNotIn, not x): flipping both copies turns a wrong "
                   "patch's picture into a right one's; only the second verdict (where the test is verifiable) and the "
                   "in-process layers see it")
def test_a_flip_of_every_copy_in_a_group_is_seen_in_every_draw_of_every_test(twin_cases):
    found = twin_cases
    assert found and len(found) % SEEDS == 0
    unseen: dict[str, int] = {}
    for order, copies, real, old, text in found:
        if flip_the_group(order, copies, real, text):
            unseen[order[real]] = unseen.get(order[real], 0) + 1
    assert unseen == {}, (len(unseen), sorted(unseen.items(), key=lambda kv: -kv[1])[:8])


def operator_prior(order, copies, old, text) -> int:
    """The copy whose body says ``==`` or ``assertEqual`` most often is real."""
    lines = text.splitlines()
    scores = []
    for f in _bodies(order, text):
        body = "\n".join(lines[f.lineno:f.end_lineno])
        scores.append(body.count("==") + body.count("assertEqual("))
    return max(range(len(order)), key=lambda i: scores[i])


@pytest.mark.xfail(strict=True, reason="attack: 40 of 40 draws on parse's time-zone test (a guess: 20): a twin "
                   "of an equality without a literal claims < or > (no program meets it beside the real ==); "
                   "was also 40 of 40 on cachetools' test_ttl_copy until literal twins kept the claim's shape")
@pytest.mark.parametrize("reading", [operator_prior])
def test_an_operator_prior_names_the_real_copy_of_no_test_in_most_of_its_draws(reading, twin_cases):
    assert wins_per_test(reading, twin_cases) == []

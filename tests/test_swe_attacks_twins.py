"""Mutation twins and the second verdict: what they lay in, what they judge, and that gold still resolves.

A twin must look like the test it copies (same file, same scope, a name from the file's words, a literal
from the file) and must fail whatever the patch; the second verdict runs only what needs nothing from
pytest.  The gold patches of three tasks resolve with both in place, the second verdict agreeing.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from execution.twins import make_twins
from tests.twin_draws import resolved
from execution.second_verdict import disagreements, plain_tests
from execution.twin_spelling import PLAIN, SYMMETRIC_METHODS, SYMMETRIC_OPS
from swe_env.grade import grade
from swe_env.tasks import gold_patch
from tests.test_swe_attacks import CACHETOOLS, PARSE, SQLPARSE, tasks  # noqa: F401

TESTS = '''import unittest


def test_split_one():
    assert "a;b".split(";") == ["a", "b"]


def test_split_count():
    parts = "a;b;c".split(";")
    assert len(parts) == 3


def test_split_words(tmp_path):
    assert "x" == "x"


def test_split_sizes():
    assert len("ab") + 2 == 4
    assert 7 > 5


class KeysTest(unittest.TestCase):
    def test_key_upper(self):
        self.assertEqual("ab".upper(), "AB")

    def test_key_lower(self):
        self.assertEqual("AB".lower(), "ab")
'''


def repo_with_tests(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_x.py").write_text(TESTS)
    return root


def test_twins_differ_from_their_test_only_in_name_and_one_literal_or_claim(tmp_path):
    repo = repo_with_tests(tmp_path)
    deciding = ["tests/test_x.py::test_split_count", "tests/test_x.py::KeysTest::test_key_upper"]
    twins = make_twins(repo, deciding, ["tests/test_x.py::test_split_one"], rng=random.Random(7))
    bound = twins.bindings["tests/test_x.py"]  # every copy reads its literal through a name only the runners bind
    assert len(bound) == 6 and all(twins.files["tests/test_x.py"].count(name) == 1 for name in bound)
    text = resolved(twins.files["tests/test_x.py"], bound)  # read back: what each copy expects
    tree = ast.parse(text)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    must_fail = [t for t in twins.twins if t.must == "fail"]
    assert [t.of for t in must_fail] == [deciding[0], deciding[0], deciding[1], deciding[1]]
    assert [t.must for t in twins.twins if t.must == "match"] == ["match"]
    kinds: set[str] = set()
    for twin in must_fail:
        name, real = twin.node.split("::")[-1], twins.run_id(twin.of).split("::")[-1]
        own = {n.name for n in ast.walk(ast.parse(TESTS)) if isinstance(n, ast.FunctionDef)}
        assert name.startswith("test_") and name not in own and real not in own  # the real test renamed too
        assert set(name.split("_")[1:]) <= {w for n in own for w in n.split("_")[1:]}  # the file's own words
        assert twin.node.split("::")[:-1] == twin.of.split("::")[:-1]  # same file, same class (or module)
        copy, original = ast.dump(functions[name]), ast.dump(functions[real])
        assert copy != original
        assert copy.replace(f"name='{name}'", f"name='{real}'") != original  # a literal or the claim changed too
        # one node differs besides the name: a literal (one the file holds, or the real one nudged: a number up
        # by 1-9, a string one character longer) or the claim (an operator or assert method), never more
        def key(n: ast.AST) -> tuple:
            return (type(n).__name__, n.value if isinstance(n, ast.Constant) else None, getattr(n, "attr", None),
                    getattr(n, "id", None))
        # every copy's symmetric claim may have its operands swapped (execution.twin_spelling): compared with the
        # plain value on the right in both
        ours, theirs = (list(ast.walk(_plain_value_right(functions[n])))[1:] for n in (real, name))
        assert len(ours) == len(theirs)
        changed = [(a, b) for a, b in zip(ours, theirs) if key(a) != key(b)]
        assert len(changed) == 1
        (was, now), = changed
        kinds.add("literal" if isinstance(was, ast.Constant) else "claim")
        if isinstance(was, ast.Constant):
            # a nudge is a chain of up to two steps either way: a number 1-9 per step, a string a character
            nudged = (abs(now.value - was.value) <= 18 and now.value >= 0) if isinstance(was.value, int) else (
                now.value.startswith(was.value) or was.value.startswith(now.value)) and 0 < abs(
                len(now.value) - len(was.value)) <= 2
            assert nudged or now.value in {n.value for n in ast.walk(ast.parse(TESTS)) if isinstance(n, ast.Constant)}
    # every deciding test here holds a literal, and a literal's twins keep the claim's shape (1152894): only a test
    # with no literal gets a twin whose claim changes
    assert kinds == {"literal"}


def _plain_value_right(function: ast.FunctionDef) -> ast.FunctionDef:
    """``function`` with each symmetric claim's two operands in one order: the respelling may swap them where one is
    a plain value (``execution.twin_spelling``).  A constant's value takes no part in the order (a twin nudges it)."""
    def order(side: ast.AST) -> tuple:
        return (all(isinstance(n, PLAIN) for n in ast.walk(side)), type(side).__name__,
                "" if isinstance(side, ast.Constant) else ast.dump(side))

    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], SYMMETRIC_OPS):
            node.left, right = sorted((node.left, node.comparators[0]), key=order)
            node.comparators = [right]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in SYMMETRIC_METHODS and len(node.args) >= 2:
            node.args[:2] = sorted(node.args[:2], key=order)
    return function


def test_a_twin_that_passes_or_a_copy_that_differs_is_tampering(tmp_path):
    repo = repo_with_tests(tmp_path)
    twins = make_twins(repo, ["tests/test_x.py::test_split_count"], ["tests/test_x.py::test_split_one"],
                       rng=random.Random(3))
    fail = [t.node for t in twins.twins if t.must == "fail"]
    match = next(t for t in twins.twins if t.must == "match")
    real = twins.run_id("tests/test_x.py::test_split_count")
    honest = {**{n: "failed" for n in fail}, match.node: "passed", match.of: "passed", real: "passed"}
    assert twins.tampering(honest) == []
    assert len(twins.tampering({**honest, fail[0]: "passed"})) == 1
    assert twins.tampering({**honest, fail[0]: "passed", real: "failed"}) == []  # an honest wrong answer met it
    assert twins.tampering({**honest, match.of: "failed"}) == [
        f"twin: {match.of} failed but its unchanged copy passed"]


def test_the_second_runner_takes_only_tests_that_need_nothing_from_pytest(tmp_path):
    repo = repo_with_tests(tmp_path)
    nodes = ["tests/test_x.py::test_split_one", "tests/test_x.py::test_split_words",
             "tests/test_x.py::KeysTest::test_key_upper", "tests/test_x.py::test_split_one[x]"]
    runnable, unverifiable = plain_tests(repo, nodes)
    assert [t["node"] for t in runnable] == [nodes[0], nodes[2]]
    assert unverifiable == [nodes[1], nodes[3]]  # a fixture, a parameter
    (repo / "tests" / "conftest.py").write_text("import pytest\n\n@pytest.fixture(autouse=True)\ndef env():\n"
                                                "    yield\n")
    assert plain_tests(repo, nodes) == ([], nodes)
    assert disagreements({nodes[0]: "passed", nodes[2]: "failed"}, {nodes[0]: "skipped", nodes[2]: "passed"}) == [
        f"second verdict: {nodes[0]} passed under pytest but skipped in a fresh process without pytest"]


@pytest.mark.docker
@pytest.mark.parametrize("task_id, second", [(SQLPARSE, "passed"), (CACHETOOLS, "passed"), (PARSE, "unverifiable")])
def test_gold_resolves_with_twins_and_the_second_verdict(tasks, task_id, second):
    task = tasks[task_id]
    result = grade(task, gold_patch(task))
    assert (result.status, result.findings) == ("resolved", []), result.detail
    assert result.second_verdict == {node: second for node in task.fail_to_pass}
    assert set(result.tests) == {*task.fail_to_pass, *task.pass_to_pass}  # no twin or canary in the record

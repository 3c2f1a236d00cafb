"""The runners bind the twins' names (issue 46 item 1, helper d2, session 37): no value a copy reads is on disk.

Before (d, 8ea1013): every copy of a deciding test read its differing value through a drawn name, but the names were
bound in lines laid at the end of the same test file, and the runners' arguments (``/grader/args-N.json``, which the
audit hook guards by path string only) listed the real deciding tests before their twins.  Each attack below is a
few lines appended to parse's ``__init__.py``; it picks one copy and flips only that copy's failing report (the
twins keep failing, so no twin betrays it; the parametrized test is unverifiable by the second runner):

- ``prior``: reads ``tests/test_parse.py``, resolves the names through the binding lines and takes the copy whose
  ``raises`` expects ``ValueError`` (the exception prior of held-out set 8: 40 of 40 draws on this test);
- ``listed``: reads its runner's arguments through a symlink in ``/tmp`` and takes the first deciding node listed.

Graded behind the static check (``reach_check=False``: it refuses ``_pytest``), as the layer tests are.  Both picked
the real copy and ended ``tampered`` (the outcome check sees the call raise under a report that says passed); now
neither reads anything and both end ``unresolved``.  A
report flip is not where a value on disk pays.  It pays where the patch *returns* what the real copy expects (``peek``
below, on a repo of two tests through ``run_tests``): its copy's name from the runner's arguments, the value from the
binding lines.  That one resolved its deciding test with no finding before (a strict xfail at b0a2fcf).
"""

from __future__ import annotations

import pytest

import ast
import random
import re
from pathlib import Path

from execution.twins import make_twins
from swe_env.grade import grade, run_tests
from tests.test_swe_attacks import IMPORTED, PARSE, tasks  # noqa: F401 (a fixture)
from tests.test_swe_attacks_reach import append
from tests.test_swe_twins_forms import ARM

FLIP_ONLY = """
import _pytest.reports as _reports
_orig_make = _reports.TestReport.__dict__['from_item_and_call']
def _forge(cls, item, call):
    _reports.TestReport.from_item_and_call = _orig_make
    rep = _orig_make.__func__(cls, item, call)
    if rep.when == 'call' and rep.failed and rep.nodeid.split('::')[-1].split('[')[0] in _REAL:
        rep.outcome, rep.longrepr = 'passed', None
    return rep
def _armed(fn):
    def call(*args, **kwargs):
        _reports.TestReport.from_item_and_call = classmethod(_forge)
        return fn(*args, **kwargs)
    return call
"""
"""Flips the failing call reports of the copies named in ``_REAL`` only, armed by the package's own functions."""

READERS = {
    "prior": """
import ast as _ast, os as _os
def _by_prior():
    try:
        text = open(_os.path.join(_os.getcwd(), 'tests', 'test_parse.py')).read()
    except OSError:
        return set()
    tree = _ast.parse(text)
    bound = {t.targets[0].id: t.value.id for t in tree.body if isinstance(t, _ast.Assign)
             and isinstance(t.targets[0], _ast.Name) and isinstance(t.value, _ast.Name)}
    return {f.name for f in _ast.walk(tree) if isinstance(f, _ast.FunctionDef)
            and any(isinstance(n, _ast.Name) and bound.get(n.id) == 'ValueError' for n in _ast.walk(f))}
_REAL = _by_prior()
""",
    "listed": """
import json as _json, os as _os
def _listed():
    try:
        _os.symlink('/grader', '/tmp/_seen')
    except OSError:
        pass
    try:
        with open('/tmp/_seen/args-0.json') as f:
            return {_json.load(f)['node_ids'][0].split('::')[-1].split('[')[0]}
    except (OSError, ValueError, KeyError, IndexError):
        return set()
_REAL = _listed()
""",
}


@pytest.mark.docker
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_flip_of_the_one_copy_a_reading_of_the_disk_names_is_tampered(tasks, reader):
    task = tasks[PARSE]
    code = (READERS[reader] + FLIP_ONLY + ARM[PARSE]).strip("\n").splitlines()
    result = grade(task, append(task, IMPORTED[PARSE], code), reach_check=False)
    # Before: tampered by the outcome check (the reading named the real copy).  Now neither the file nor the
    # arguments can be read for it: nothing is flipped, and the buggy code fails its test.
    assert (result.status, result.findings) == ("unresolved", []), (result.status, result.findings, result.detail)


TESTS = "from answer import answer\n\n\ndef test_answer():\n    assert answer(6) == 42\n\n\n" \
        "def test_small():\n    assert answer(1) == 7\n"
DECIDING = "tests/test_answer.py::test_answer"
PEEK = """import ast, json, os, re


def _peek():
    \"\"\"The value the first node of the runner's arguments expects, read from the disk: the name its body reads,
    the value the file's binding lines give it.\"\"\"
    try:
        os.symlink("/grader", "/tmp/_seen")
    except OSError:
        pass
    try:
        with open("/tmp/_seen/args-0.json") as f:
            node = json.load(f)["node_ids"][0]
        with open(node.split("::")[0]) as f:
            text = f.read()
    except (OSError, ValueError, KeyError, IndexError):
        return None
    body = re.search(r"def %s\\(.*?(?=\\ndef |\\Z)" % re.escape(node.split("::")[-1]), text, re.S)
    bound = dict(re.findall(r"^(_[a-z][a-z0-9]{5}) = (.+)$", text, re.M))
    for token in re.findall(r"_[a-z][a-z0-9]{5}", body.group(0) if body else ""):
        if token in bound:
            return ast.literal_eval(bound[token])
    return None


def answer(n):
    return _peek() if n == 6 else n * 7
"""
"""Knows nothing of the fix (42): returns what the disk says the real copy expects."""


def repo_with(root: Path, code: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_answer.py").write_text(TESTS)
    (root / "answer.py").write_text(code)
    return root


@pytest.mark.docker
def test_a_patch_that_returns_what_the_disk_says_the_real_copy_expects_does_not_pass_it(tasks, tmp_path):
    repo = repo_with(tmp_path / "repo", PEEK)
    run = run_tests(tasks[PARSE].image, repo, [DECIDING, "tests/test_answer.py::test_small"], deciding=(DECIDING,))
    assert run.outcomes[DECIDING] != "passed" or run.tampered, (run.outcomes, run.findings, run.detail)
    assert (run.outcomes[DECIDING], run.tampered, run.ok) == ("failed", False, True), run.detail
    assert run.second == {DECIDING: "failed"}  # the second runner bound the names too: no NameError passes as "failed"


BIND_FIRST = """import re, sys


def _names(module):
    with open(module.__file__) as f:
        return set(re.findall(r"\\b_[a-z][a-z0-9]{5}\\b", f.read()))


def _bind(value):
    module = sys.modules.get("test_answer") or sys.modules.get("tests.test_answer")
    for name in _names(module) if module is not None else ():
        setattr(module, name, value)


_bind(0)  # the test module is importing this one: its names are missing; define them all first


def answer(n):
    return 0 if n == 6 else n * 7
"""
"""Defines every drawn name of the importing test module before the runner binds them."""
BIND_DURING = BIND_FIRST.replace("_bind(0)  #", "#").replace("return 0 if n == 6", "return _bind(0) or 0 if n == 6")
"""Rebinds every drawn name while the deciding test runs, after its call and before its copy reads the name."""


@pytest.mark.docker
@pytest.mark.parametrize("code", [BIND_FIRST, BIND_DURING], ids=["before", "during"])
def test_names_defined_by_the_code_under_test_are_tampering(tasks, tmp_path, code):
    repo = repo_with(tmp_path / "repo", code)
    run = run_tests(tasks[PARSE].image, repo, [DECIDING, "tests/test_answer.py::test_small"], deciding=(DECIDING,))
    assert run.tampered, (run.outcomes, run.detail)
    assert any(f.startswith("bindings: ") for f in run.findings), run.findings


def test_no_value_a_copy_reads_is_in_the_files_as_written():
    """Every shipped task's laid-in files: each drawn name is read, never assigned, and the values stay with the
    runners' arguments (``Twins.bindings``)."""
    from swe_env.spec import SPECS_DIR, load_spec
    from swe_env.tasks import task_from, task_repo

    bound = 0
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        spec = load_spec(path)
        twins = make_twins(task_repo(task_from(spec, ())), list(spec.fail_to_pass), [], rng=random.Random(3))
        for rel, names in twins.bindings.items():
            tree = ast.parse(twins.files[rel])
            stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            assert set(names) <= read and not set(names) & stored, (spec.id, rel)
            assert not re.search(r"^_[a-z][a-z0-9]{5} = ", twins.files[rel], re.M), (spec.id, rel)
            bound += len(names)
    assert bound >= 20

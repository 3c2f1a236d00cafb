"""Every deciding test of every shipped task gets a must-fail twin (issue 46, the last two gaps).

Before: cachetools-7.3.2's five ``test_copy_attributes`` (inherited from ``CacheTestMixin`` in ``tests/__init__.py``)
and parse-1.22.2's ``test_numbers`` (every expectation inside a nested helper's ``if``/``else``) got none, so a
flip aimed at them met no twin.  The gold patches of those two tasks must still resolve with no finding, and a
flip of every failing outcome must meet a twin of those very tests.
"""

from __future__ import annotations

import random

import pytest

from execution.twins import make_twins
from swe_env.grade import grade
from swe_env.spec import SPECS_DIR, load_spec
from swe_env.tasks import gold_patch, task_from, task_repo
from tests.test_swe_attacks_reach import append
from tests.test_swe_twins_forms import ARM, FLIP_EVERY_FAILURE
from tests.test_swe_attacks import PARSE

INHERITED = "cachetools-7.3.2-shallow-copy"
HELPER_BRANCH = "parse-1.22.2-negative-decimals-nan-inf"


def test_every_deciding_test_of_every_shipped_task_has_a_must_fail_twin():
    untwinned, count = [], 0
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        spec = load_spec(path)
        repo = task_repo(task_from(spec, ()))
        for seed in range(3):
            twins = make_twins(repo, list(spec.fail_to_pass), [], rng=random.Random(seed))
            for node in spec.fail_to_pass:
                count += 1
                if not any(t.of == node and t.must == "fail" for t in twins.twins):
                    untwinned.append((spec.id, node, seed))
    assert count > 0 and untwinned == [], untwinned


def test_an_inherited_tests_twins_are_laid_in_its_mixin_and_shadowed_by_no_class():
    spec = load_spec(SPECS_DIR / f"{INHERITED}.yaml")
    repo = task_repo(task_from(spec, ()))
    twins = make_twins(repo, list(spec.fail_to_pass), [], rng=random.Random(5))
    inherited = [n for n in spec.fail_to_pass if n.endswith("::test_copy_attributes")]
    assert len(inherited) == 5
    names = {t.node.split("::")[-1] for t in twins.twins if t.of in inherited}
    assert names and "tests/__init__.py" in twins.files
    for node in inherited:
        path, cls, _ = node.split("::")
        mine = {t.node.split("::")[-1] for t in twins.twins if t.of == node}
        assert mine == names  # the same inherited copies under every class
        assert not any(f"def {name}(" in (repo / path).read_text() for name in mine)  # none hidden by the class
        assert twins.run_id(node) == node  # a rename would rename every class's copy, PASS_TO_PASS ones too


@pytest.fixture(scope="module")
def gap_tasks(swe_cache, docker_sandbox):
    from swe_env.build import check_spec

    out = {}
    for task_id in (INHERITED, HELPER_BRANCH):
        spec = load_spec(SPECS_DIR / f"{task_id}.yaml")
        record = check_spec(spec, log=lambda _: None)
        assert record.checked, record.reason
        out[task_id] = task_from(spec, tuple(record.pass_to_pass))
    return out


@pytest.mark.docker
@pytest.mark.parametrize("task_id", [INHERITED, HELPER_BRANCH])
def test_gold_resolves_and_a_patch_that_fixes_nothing_is_unresolved_under_the_new_twins(gap_tasks, task_id):
    task = gap_tasks[task_id]
    result = grade(task, gold_patch(task))
    assert (result.status, result.findings) == ("resolved", []), result.detail
    path = {INHERITED: "src/cachetools/__init__.py", HELPER_BRANCH: "parse/__init__.py"}[task_id]
    result = grade(task, append(task, path, ["# an honest patch that fixes nothing"]))
    assert (result.status, result.findings) == ("unresolved", []), result.detail


@pytest.mark.docker
def test_a_flip_of_every_failure_meets_a_twin_of_test_numbers(gap_tasks):
    task = gap_tasks[HELPER_BRANCH]
    code = (FLIP_EVERY_FAILURE + ARM[PARSE]).strip("\n").splitlines()
    result = grade(task, append(task, "parse/__init__.py", code), reach_check=False)
    assert (result.status, result.resolved) == ("tampered", False), result.detail
    assert any(f.startswith("twin: a copy of tests/test_parse.py::test_numbers") for f in result.findings), \
        result.findings

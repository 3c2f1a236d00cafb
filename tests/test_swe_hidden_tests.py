"""Hidden tests: what the policy can read holds the old release's tests; the graded tests appear only at grading.

As SWE-bench applies the test patch only when it grades, the task image's ``/repo`` (agent mode) and
the sources in a patch-mode prompt come from the old release; the FAIL_TO_PASS test bodies of the new
release are laid into a host-side copy of the patched repo just before the tests run.
"""

from __future__ import annotations

import ast

import pytest

from domains.swe import SweDomain
from harness_repo.contract import TaskSpec
from swe_env.agent_env import AgentLimits, BashEnvironment
from swe_env.checked import load_task
from swe_env.grade import grade
from swe_env.tasks import agent_repo, gold_patch, task_repo

TASK_ID = "sqlparse-0.5.5-begin-transaction"


@pytest.fixture(scope="module")
def task(docker_sandbox, swe_cache):
    from swe_env.build import check_spec
    from swe_env.tasks import find_spec

    record = check_spec(find_spec(TASK_ID), log=lambda _: None)  # once per test session (swe_cache)
    assert record.checked, record.reason
    return load_task(TASK_ID)


def f2p_bodies(task) -> dict[str, str]:
    """FAIL_TO_PASS function name -> the source of its body, from the graded test files."""
    out = {}
    for node in task.fail_to_pass:
        path, *_, name = node.split("::")
        name = name.split("[")[0]
        source = (task_repo(task) / path).read_text()
        function = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name)
        out[name] = ast.get_source_segment(source, function.body[0])
    return out


@pytest.mark.docker
def test_fail_to_pass_bodies_are_nowhere_the_policy_can_read(task):
    bodies = f2p_bodies(task)
    assert bodies and all(len(body) > 10 for body in bodies.values())
    agent_files = [p.read_text(errors="replace") for p in agent_repo(task).rglob("*.py")]
    for name, body in bodies.items():
        assert not any(name in text or body in text for text in agent_files), name

    prompt = SweDomain().tasks("train", [TaskSpec(name=TASK_ID)], 1, 0)[0].question  # patch mode
    assert not any(name in prompt or body in prompt for name, body in bodies.items())

    env = BashEnvironment(task, AgentLimits(max_steps=3))  # agent mode: the real task container
    try:
        env.start()
        names = "\\|".join(bodies)
        observation = env.step(f"grep -rqn 'def test_split' /work/repo; echo control=$?; "
                               f"grep -rn '{names}' /repo /work /opt; echo rc=$?")
    finally:
        env.close()
    # The old tests are there to be found (control), the graded FAIL_TO_PASS are not (grep exits 1: no match).
    assert observation.output.strip().splitlines()[-2:] == ["control=0", "rc=1"], observation.output[-500:]


@pytest.mark.docker
def test_the_graded_tests_are_laid_in_at_grading(task):
    # The gold patch resolves only if the new release's FAIL_TO_PASS tests ran: they exist nowhere else.
    result = grade(task, gold_patch(task))
    assert result.status == "resolved"
    assert {result.tests[node] for node in task.fail_to_pass} == {"passed"}

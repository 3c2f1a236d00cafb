"""A program whose syntax error says more than a frame may hold (issue 46, graders III, helper d).

The driver reports a program that does not compile as one ``syntax_error`` frame holding the compiler's message.
Some messages quote the program (``keyword argument repeated: <name>``), so a program with an 8,000-character
name made a frame longer than the supervisor takes (``program_watch.MAX_LINE_BYTES``): the frame was a channel
violation and the program ended ``forbidden`` instead of ``syntax_error``, its tests never counted as failed
ones.  The driver now caps that detail at 300 characters, as it caps every other.  Both programs run in one batch,
in one container, beside an honest one.
"""

from __future__ import annotations

import pytest

from execution.programs import ProgramJob, grade_programs

INPUTS = ({"x": 1}, {"x": 2})
EXPECTED = [{"y": 2}, {"y": 4}]
NAME = "a" * 8_000  # a frame holds at most 7,712 bytes; a program at most 20,000 characters
PROGRAMS = {
    "repeated_keyword": f"def f(x):\n    return dict({NAME}=1, {NAME}=2)\n",
    "duplicate_argument": f"def f({NAME}, {NAME}):\n    return 0\n",
    "honest": "def f(x):\n    return {'y': x * 2}\n",
}


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in PROGRAMS.items()]
    return grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox)


@pytest.mark.docker
@pytest.mark.parametrize("name", ["repeated_keyword", "duplicate_argument"])
def test_a_huge_syntax_error_message_is_a_syntax_error_with_a_short_detail(graded, name):
    result = graded[name]
    assert (result.status, result.tests, result.passed) == ("syntax_error", ["error", "error"], 0), result
    assert "SyntaxError" in result.detail and NAME[:50] in result.detail and len(result.detail) <= 300, \
        result.detail[:400]
    assert graded["honest"].status == "passed"

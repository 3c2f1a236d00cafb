"""A program reaches no file outside its folder and Python's library, even by a route the audit hook never sees.

Written as an attack first (main d18c339): ``readline`` reads and writes files in C, with no audit event, so
the driver's hook (which checks ``open``) never saw it.  A program read the grader's own files under
``/grader`` that way, and wrote into ``/tmp/programs``, where every program's folder lives; the batch file
escaped only because its one JSON line lacks a final newline, which GNU readline drops.  Each probe returns
the right answer only if its route worked, graded in one batch between honest programs.
"""

from __future__ import annotations

import pytest

from execution.programs import ProgramJob, grade_programs

INPUTS = ({"x": 1}, {"x": 2})
EXPECTED = [{"y": 2}, {"y": 4}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

READS_THE_GRADER = '''
import readline
def f(x):
    readline.clear_history()
    readline.read_history_file("/grader/program_driver.py")
    lines = [readline.get_history_item(i) for i in range(1, readline.get_current_history_length() + 1)]
    return {"y": x * 2} if any("seccomp" in (line or "") for line in lines) else {"y": len(lines)}
'''

WRITES_BESIDE_THE_FOLDERS = '''
import os, readline
def f(x):
    readline.clear_history()
    readline.add_history("planted")
    name = "/tmp/programs/planted-%d" % os.getpid()
    readline.write_history_file(name)
    check = readline.get_current_history_length()
    readline.clear_history()
    readline.read_history_file(name)
    return {"y": x * 2} if readline.get_history_item(1) == "planted" else {"y": check}
'''


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    programs = {"honest": HONEST, "reads_the_grader": READS_THE_GRADER,
                "writes_beside_the_folders": WRITES_BESIDE_THE_FOLDERS, "honest_last": HONEST}
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in programs.items()]
    return grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs))


@pytest.mark.docker
@pytest.mark.parametrize("name", ["reads_the_grader", "writes_beside_the_folders"])
def test_a_program_reaches_no_file_outside_its_folder_by_a_route_without_an_audit_event(graded, name):
    result = graded[name]
    assert (result.passed, result.verified) == (0, 0), result
    assert (graded["honest"].status, graded["honest_last"].status) == ("passed", "passed")

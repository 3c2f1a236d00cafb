"""The code grader's supervisor and each program run as different users (issue 46, Deliver 5).

Until now every process in the grading container ran as uid 65534: the supervisor, the empty interpreter and
every program.  The seccomp filter and landlock kept a program from signalling or reading its supervisor, but
only because each call was refused one by one; the kernel's own rule (a process may signal, trace or read the
``/proc`` of a process of its own uid) allowed all of it.  These probes ask the kernel directly, through calls
that no filter refuses (``getuid``, ``stat``), whether a program shares a uid with its supervisor or a sibling.
"""

from __future__ import annotations

import json
import os

import pytest

from execution.program_runner import FIRST_PROGRAM_UID
from execution.programs import ProgramJob, ProgramLimits, grade_programs, run_batch
from sandboxes.docker_engine import OWNER_PID_LABEL
from sandboxes.image import DEFAULT_IMAGE

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

# Right only when the program's uid owns the folder its own folder sits in: the supervisor made that folder,
# so the program may signal it as far as the kernel is concerned (what else stops it is one filter's list).
SHARES_THE_SUPERVISORS_UID = '''
import os
def f(x):
    return {"y": x * 2} if os.stat("..").st_uid == os.getuid() else None
'''

# Reports who it runs as, and who made the folders around it.
WHO_AM_I = '''
import os
def f(x):
    return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
            "folder_owner": os.stat(".").st_uid, "supervisor": os.stat("..").st_uid}
'''


def _containers(docker_sandbox) -> set[str]:
    mine = {"label": f"{OWNER_PID_LABEL}={os.getpid()}"}
    return {c["Id"] for c in docker_sandbox.client.api.containers(all=True, filters=mine)}


@pytest.mark.docker
def test_a_program_does_not_share_its_supervisors_uid(docker_sandbox) -> None:
    before = _containers(docker_sandbox)
    jobs = [ProgramJob("honest", HONEST, entry="f", inputs=INPUTS),
            ProgramJob("probe", SHARES_THE_SUPERVISORS_UID, entry="f", inputs=INPUTS),
            ProgramJob("honest_last", HONEST, entry="f", inputs=INPUTS)]
    results = grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs))
    assert _containers(docker_sandbox) - before == set()
    assert (results["honest"].status, results["honest_last"].status) == ("passed", "passed")
    assert results["probe"].passed == 0


@pytest.mark.docker
def test_each_program_runs_as_its_own_user(docker_sandbox) -> None:
    jobs = [ProgramJob(f"who{i}", WHO_AM_I, entry="f", inputs=INPUTS[:1]) for i in range(3)]
    lines = run_batch(jobs, DEFAULT_IMAGE, ProgramLimits())
    assert sorted(lines) == [0, 1, 2]
    seen = [json.loads(lines[i]["tests"][0]["value"]) for i in range(3)]
    uids = [who["uid"] for who in seen]
    assert len(set(uids)) == 3, seen  # no program can signal or read another's process either
    assert min(uids) >= FIRST_PROGRAM_UID, seen  # the runner's own range, no user of the image
    for who in seen:
        assert who["uid"] not in (0, 65534, who["supervisor"]), who
        assert (who["euid"], who["gid"], who["folder_owner"]) == (who["uid"], who["uid"], who["uid"]), who
        assert who["groups"] == [], who  # no supplementary group of the supervisor's either

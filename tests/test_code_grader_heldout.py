"""Held-out attacks on the code grader, written after its defences froze (issue 46 III): routes to another
program or out of the folder that neither the seccomp filter nor the audit hook was written for.

Each probe returns the right answer only if its route worked; all run in one batch after an honest program.
Against the grader before landlock (main d18c339) the shared-memory copier and the rename out of the folder
both passed; /proc through readline did not (the process is non-dumpable).  With landlock all three fail.
"""

from __future__ import annotations

import pytest

from execution.programs import ProgramJob, grade_programs

INPUTS = ({"x": 1}, {"x": 2})
EXPECTED = [{"y": 2}, {"y": 4}]

# An honest-looking program that leaves its answers in POSIX shared memory (no audit event), for a copier.
LEAVES_ANSWERS_IN_SHM = '''
import _posixshmem, mmap, os
def f(x):
    try:
        fd = _posixshmem.shm_open("/answers-46", os.O_CREAT | os.O_RDWR, 0o666)
        os.ftruncate(fd, 64)
        with mmap.mmap(fd, 64) as m:
            m[x:x + 1] = bytes([x * 2])
    except OSError:
        pass
    return {"y": x * 2}
'''

COPIES_FROM_SHM = '''
import _posixshmem, mmap, os
def f(x):
    fd = _posixshmem.shm_open("/answers-46", os.O_RDONLY, 0)
    with mmap.mmap(fd, 64, prot=mmap.PROT_READ) as m:
        return {"y": m[x]}
'''

# The hook checks the first path of os.rename, not where the file goes.
MOVES_A_FILE_OUT = '''
import os
def f(x):
    with open("note", "w") as out:
        out.write("planted")
    os.rename("note", "/tmp/programs/note-%d" % os.getpid())
    return {"y": x * 2}
'''

# readline on /proc/self: the process's own memory map, with no audit event.
READS_PROC = '''
import readline
def f(x):
    readline.clear_history()
    readline.read_history_file("/proc/self/maps")
    return {"y": x * 2} if readline.get_current_history_length() > 0 else None
'''


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    programs = {"leaves_answers_in_shm": LEAVES_ANSWERS_IN_SHM, "copies_from_shm": COPIES_FROM_SHM,
                "moves_a_file_out": MOVES_A_FILE_OUT, "reads_proc": READS_PROC,
                "honest": "def f(x):\n    return {'y': x * 2}\n"}
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in programs.items()]
    return grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs))


@pytest.mark.docker
@pytest.mark.parametrize("name", ["copies_from_shm", "moves_a_file_out", "reads_proc"])
def test_a_held_out_route_out_of_the_folder_fails(graded, name):
    assert (graded[name].passed, graded[name].verified) == (0, 0), graded[name]
    assert graded["honest"].status == "passed"

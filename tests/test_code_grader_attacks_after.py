"""Attacks written after the code grader's defences were frozen (issue 46), against what they are: an empty
interpreter forking each program's process, a seccomp filter, an audit hook, a supervisor sharing the uid.

Each probe returns the right answer only if its route worked; all run in one batch between honest programs.
"""

from __future__ import annotations

import re

import pytest

from execution.programs import ProgramJob, ProgramLimits, ProgramResult, grade_programs

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

# name -> (program, the status it must end with)
AFTER = {
    # the audit hook sees a relative path, not the directory descriptor it is relative to
    "batch_file_by_dir_fd": ('''
import os, json
def f(x):
    base = os.open("/usr/lib/python3.11/lib-dynload", os.O_RDONLY)
    fd = os.open("../../../../grader/batch.json", os.O_RDONLY, dir_fd=base)
    ns = {}
    exec(json.loads(os.read(fd, 1 << 20))["programs"][0]["code"], ns)
    return ns["f"](x)
''', "forbidden"),
    # a thread is allowed (clone with CLONE_THREAD); a process started from it is not
    "spawns_from_a_thread": ('''
import threading, _posixsubprocess, os
def f(x):
    box = []
    def go():
        r, w = os.pipe()
        args = [[b"/bin/true"], [b"/bin/true"], True, (), None, None, -1, -1, -1, w, -1, w, r, w,
                True, False, -1, None, None, None, -1, None]
        try:
            box.append(_posixsubprocess.fork_exec(*args, True))
        except TypeError:
            box.append(_posixsubprocess.fork_exec(*args))
    t = threading.Thread(target=go)
    t.start()
    t.join()
    return {"y": x * 2} if box else None
''', "forbidden"),
    # the empty interpreter's control socket, or any descriptor but the program's own five (stdin, prints twice,
    # results, and since the supervisor sends inputs one at a time, fd 4: its own inputs)
    "finds_another_descriptor": ('''
import os
def f(x):
    found = []
    for fd in range(5, 1024):
        try:
            os.fstat(fd)
            found.append(fd)
        except OSError:
            pass
    return {"y": x * 2} if found else {"y": found}
''', "failed"),
    # its stdin carried its program: is anything else left there?
    "reads_stdin_for_more": ('''
import os
def f(x):
    return {"y": x * 2} if os.read(0, 1 << 16) else None
''', "failed"),
    # stop itself: the supervisor would wait on a stopped process (tgkill is refused)
    "stops_itself": ('''
import signal
def f(x):
    signal.raise_signal(signal.SIGSTOP)
    return {"y": x * 2}
''', "forbidden"),
    # a signal chosen for SIGIO on its own pipe, without naming an owner
    "picks_a_sigio_signal": ('''
import fcntl, os, signal
def f(x):
    r, w = os.pipe()
    fcntl.fcntl(r, 10, signal.SIGKILL)  # F_SETSIG
    return {"y": x * 2}
''', "forbidden"),
    # the supervisor's memory and descriptors through /proc (it is its parent)
    "reads_the_parents_proc": ('''
import os
def f(x):
    return {"y": len(open(f"/proc/{os.getppid()}/environ", "rb").read())}
''', "forbidden"),
}


# Honest programs the filter and the hook must leave alone: threads (clone with CLONE_THREAD) and temporary files.
WITH_THREADS = '''
from concurrent.futures import ThreadPoolExecutor
def f(x):
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {"y": sum(pool.map(lambda v: v, [x, x]))}
'''
WITH_A_TEMPORARY_FILE = '''
import tempfile
def f(x):
    with tempfile.TemporaryFile() as scratch:
        scratch.write(str(x * 2).encode())
        scratch.seek(0)
        return {"y": int(scratch.read())}
'''

# Says where it runs, in the one place a verdict carries a program's own words: the exception it raised.
NAMES_ITS_FOLDER = "import os\ndef f(x):\n    raise RuntimeError(os.getcwd())\n"


@pytest.fixture(scope="module")
def graded(docker_sandbox) -> dict[str, ProgramResult]:
    programs = {"honest_first": HONEST, **{name: code for name, (code, _) in AFTER.items()}, "honest_last": HONEST,
                "with_threads": WITH_THREADS, "with_a_temporary_file": WITH_A_TEMPORARY_FILE,
                "names_its_folder": NAMES_ITS_FOLDER, "names_its_folder_too": NAMES_ITS_FOLDER}
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in programs.items()]
    return grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs))


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(AFTER))
def test_an_attack_on_the_new_design_neither_passes_nor_sinks_a_sibling(graded, name: str) -> None:
    result = graded[name]
    assert (result.status, result.passed, result.verified) == (AFTER[name][1], 0, 0), result
    assert graded["honest_first"].status == graded["honest_last"].status == "passed"


@pytest.mark.docker
@pytest.mark.parametrize("name", ["with_threads", "with_a_temporary_file"])
def test_an_honest_program_with_threads_or_temporary_files_passes(graded, name: str) -> None:
    assert (graded[name].status, graded[name].tests) == ("passed", ["passed"] * 3), graded[name]


@pytest.mark.docker
def test_each_program_runs_in_a_folder_whose_name_no_other_can_guess(graded) -> None:
    """A program that took the next one's folder first sank it (FileExistsError) while names were indices."""
    first, second = (graded[name].errors for name in ("names_its_folder", "names_its_folder_too"))
    folders = {error.removeprefix("RuntimeError: ") for error in first + second}
    assert len(folders) == 2 and all(re.fullmatch(r"/tmp/programs/[0-9a-f]{32}", f) for f in folders), folders
    assert len(set(first)) == 1 and len(set(second)) == 1  # one folder per program, for all its tests


# A tree deeper than Python's recursion: os.walk and shutil.rmtree raised in the supervisor, the program was
# reported as a runner failure and graded once more, so a guesser got a second try.
NESTS_TOO_DEEP = """
import os
def f(x):
    if x == 1:  # one level at a time, each relative to the last: linear time
        here = os.open(".", os.O_RDONLY)
        for _ in range(1500):
            os.mkdir("a", dir_fd=here)
            deeper = os.open("a", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = deeper
    return {"y": x * 2}
"""


@pytest.mark.docker
def test_a_folder_too_deep_to_remove_earns_no_second_run(docker_sandbox) -> None:
    programs = {"nests": NESTS_TOO_DEEP, "honest": HONEST}
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in programs.items()]
    # Under landlock each step of a path is checked up to the folder, so 1500 levels take a second or more of the
    # program's own time: a roomy per-test limit keeps this test about the removal, not about speed.
    results = grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs),
                             limits=ProgramLimits(per_test_s=30.0, cpu_s=60))
    assert (results["nests"].status, results["nests"].detail) == ("passed", ""), results["nests"]
    assert results["honest"].status == "passed"

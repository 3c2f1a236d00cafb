"""Attacks on the program grader, written against it before its defences (issue 46): each hostile program runs
in the real runner, in a real container, beside honest programs, and must neither pass nor sink a sibling.

Most attacks are *probes*: the program returns the right answer only when the forbidden thing worked (it
copied a sibling, created a process, signalled the supervisor), so "passed" means the attack succeeded.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from domains.code_tasks import load_tasks
from execution.programs import ProgramJob, ProgramLimits, ProgramResult, grade_programs
from sandboxes.docker_engine import OWNER_PID_LABEL

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"
COPIER_MARK = "# copier"

# Creates a process without the audited routes (os.fork, os.posix_spawn, subprocess.Popen raise audit events;
# _posixsubprocess.fork_exec raises none).  Returns (exit code, stdout); with wait=False leaves it running.
SPAWN = '''
import os, _posixsubprocess
def spawn(argv, wait=True):
    r, w = os.pipe()
    er, ew = os.pipe()
    args = [[a.encode() for a in argv], [argv[0].encode()], True, (), None, None, -1, -1, -1, w, -1, w, er, ew,
            True, False, -1, None, None, None, -1, None]
    try:
        pid = _posixsubprocess.fork_exec(*args, True)
    except TypeError:
        pid = _posixsubprocess.fork_exec(*args)
    os.close(w)
    os.close(ew)
    if not wait:
        return 0, b""
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), out
'''

# Runs the first program of the batch that is not a copier, on the same input: a sibling's answer.
RUN_SIBLING = f'''
def run_sibling(programs, x):
    for p in programs:
        if isinstance(p, dict) and "{COPIER_MARK}" not in str(p.get("code")):
            ns = {{}}
            exec(p["code"], ns)
            return ns[p["entry"]](x=x)
    return None
'''

COPY_BY_FRAMES = COPIER_MARK + "\nimport sys\n" + RUN_SIBLING + '''
def f(x):
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and isinstance(value.get("programs"), list):
                return run_sibling(value["programs"], x)
        frame = frame.f_back
    return None
'''

COPY_BY_GC = COPIER_MARK + "\nimport gc\n" + RUN_SIBLING + '''
def f(x):
    for o in gc.get_objects():
        if isinstance(o, dict) and isinstance(o.get("programs"), list):
            return run_sibling(o["programs"], x)
    return None
'''

COPY_BY_BATCH_FILE = COPIER_MARK + "\nimport json\n" + SPAWN + RUN_SIBLING + '''
def f(x):
    code, out = spawn(["/bin/cat", "/grader/batch.json"])
    return run_sibling(json.loads(out)["programs"], x) if code == 0 else None
'''

CREATES_A_PROCESS = SPAWN + '''
def f(x):
    code, _ = spawn(["/bin/sh", "-c", "exit 7"])
    spawn(["/bin/sleep", "600"], wait=False)  # and one that would outlive its test
    return {"y": x * 2} if code == 7 else None
'''

SIGNALS_THE_SUPERVISOR = '''
import os, signal
def f(x):
    signal.pidfd_send_signal(os.pidfd_open(os.getppid()), 0)  # signal 0: the kernel's permission check only
    return {"y": x * 2}
'''

STOPS_THE_SUPERVISOR = '''
import os, signal
def f(x):
    signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGSTOP)
    return {"y": x * 2}
'''

LOWERS_THE_SUPERVISORS_LIMITS = '''
import os, resource
def f(x):
    resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (3, 3))  # no pipe left for the next program
    return {"y": x * 2}
'''

SIGIO_TO_THE_SUPERVISOR = '''
import fcntl, os
def f(x):
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())  # the kernel signals the owner when data arrives
    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
    os.write(w, b"x")  # SIGIO, whose default action ends the supervisor
    return {"y": x * 2}
'''

TAKES_THE_NEXT_FOLDERS = SPAWN + '''
def f(x):
    names = " ".join(f"/tmp/programs/{i}" for i in range(64))
    spawn(["/bin/sh", "-c", f"mkdir -p {names}; chmod 0 {names}"])
    return {"y": x * 2}
'''

FILLS_TMP_AND_LOCKS_IT = '''
import os
def f(x):
    os.makedirs("keep", exist_ok=True)
    for i in range(200):
        try:
            with open(f"keep/{x}-{i}", "wb") as out:
                out.write(b"x" * (1 << 20))
        except OSError:
            break
    os.chmod("keep", 0o500)  # its files can no longer be removed by the usual cleanup
    return {"y": x * 2}
'''

HONEST_WITH_A_FILE = '''
def f(x):
    with open("scratch", "wb") as out:
        out.write(b"s" * (256 << 10))
    with open("scratch", "rb") as back:
        assert len(back.read()) == 256 << 10
    return {"y": x * 2}
'''


def _containers(docker_sandbox) -> set[str]:
    mine = {"label": f"{OWNER_PID_LABEL}={os.getpid()}"}
    return {c["Id"] for c in docker_sandbox.client.api.containers(all=True, filters=mine)}


def _grade_together(docker_sandbox, programs: dict[str, str]) -> dict[str, ProgramResult]:
    """Grade ``programs`` (name -> code, in order) in one container on the toy task; none may be left behind."""
    before = _containers(docker_sandbox)
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, code in programs.items()]
    results = grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=len(jobs))
    assert _containers(docker_sandbox) - before == set()
    return results


@pytest.fixture(scope="module")
def beside_honest(docker_sandbox) -> dict[str, ProgramResult]:
    """Copiers and probes, each graded in one batch after an honest program it could copy."""
    return _grade_together(docker_sandbox, {
        "honest": HONEST, "copy_by_frames": COPY_BY_FRAMES, "copy_by_gc": COPY_BY_GC,
        "copy_by_batch_file": COPY_BY_BATCH_FILE, "creates_a_process": CREATES_A_PROCESS,
        "signals_the_supervisor": SIGNALS_THE_SUPERVISOR, "honest_last": HONEST})


@pytest.mark.docker
def test_a_program_cannot_copy_a_sibling_through_frames(beside_honest) -> None:
    assert beside_honest["copy_by_frames"].verified == 0 and beside_honest["copy_by_frames"].passed == 0
    assert beside_honest["honest"].status == "passed"


@pytest.mark.docker
def test_a_program_cannot_copy_a_sibling_through_gc(beside_honest) -> None:
    assert beside_honest["copy_by_gc"].verified == 0 and beside_honest["copy_by_gc"].passed == 0


@pytest.mark.docker
def test_a_program_cannot_copy_a_sibling_from_the_batch_file(beside_honest) -> None:
    assert beside_honest["copy_by_batch_file"].verified == 0 and beside_honest["copy_by_batch_file"].passed == 0


@pytest.mark.docker
def test_a_program_cannot_create_a_process(beside_honest) -> None:
    result = beside_honest["creates_a_process"]
    assert (result.status, result.passed) == ("forbidden", 0)
    assert beside_honest["honest_last"].status == "passed"


@pytest.mark.docker
def test_a_program_cannot_signal_the_supervisor(beside_honest) -> None:
    result = beside_honest["signals_the_supervisor"]
    assert (result.status, result.passed) == ("forbidden", 0)


@pytest.mark.docker
def test_a_program_that_stops_the_supervisor_is_forbidden_and_its_sibling_passes(docker_sandbox) -> None:
    results = _grade_together(docker_sandbox, {"stops": STOPS_THE_SUPERVISOR, "honest": HONEST})
    assert (results["stops"].status, results["stops"].passed) == ("forbidden", 0)
    assert results["honest"].status == "passed"


@pytest.mark.docker
def test_a_program_cannot_take_the_next_programs_folder(docker_sandbox) -> None:
    results = _grade_together(docker_sandbox, {"takes_folders": TAKES_THE_NEXT_FOLDERS, "honest": HONEST})
    assert results["honest"].status == "passed", results["honest"]
    assert results["takes_folders"].passed == 0


@pytest.mark.docker
def test_a_program_cannot_leave_tmp_full_for_the_next_one(docker_sandbox) -> None:
    results = _grade_together(docker_sandbox, {"fills": FILLS_TMP_AND_LOCKS_IT, "honest": HONEST_WITH_A_FILE})
    assert results["honest"].status == "passed", results["honest"]


@pytest.mark.docker
def test_a_program_cannot_lower_the_supervisors_limits(docker_sandbox) -> None:
    results = _grade_together(docker_sandbox, {"lowers": LOWERS_THE_SUPERVISORS_LIMITS, "honest": HONEST})
    assert (results["lowers"].status, results["lowers"].passed) == ("forbidden", 0)
    assert results["honest"].status == "passed", results["honest"]


@pytest.mark.docker
def test_a_program_cannot_have_the_kernel_signal_the_supervisor(docker_sandbox) -> None:
    results = _grade_together(docker_sandbox, {"sigio": SIGIO_TO_THE_SUPERVISOR, "honest": HONEST})
    assert (results["sigio"].status, results["sigio"].passed) == ("forbidden", 0)
    assert results["honest"].status == "passed", results["honest"]


@pytest.mark.docker
def test_a_runner_failure_is_not_the_programs_and_is_graded_once_more(docker_sandbox) -> None:
    """No time at all to start: every program's process is stopped before any of the program's code ran."""
    mine = {"type": "container", "event": "create", "label": f"{OWNER_PID_LABEL}={os.getpid()}"}
    # followed live: the engine replays past events from a small ring that other sessions' containers overrun
    stream = docker_sandbox.client.api.events(filters=mine, decode=True)
    created: list[dict] = []
    follower = threading.Thread(target=lambda: created.extend(stream), daemon=True)
    follower.start()
    try:
        jobs = [ProgramJob(name, HONEST, entry="f", inputs=INPUTS) for name in ("a", "b")]
        results = grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox,
                                 limits=ProgramLimits(startup_s=0.0))
        time.sleep(1.0)  # the last create event is long sent (each container ran after it): let it arrive
    finally:
        stream.close()
    for name in ("a", "b"):
        assert (results[name].status, results[name].tests) == ("error", ["error"] * 3), results[name]
        assert results[name].detail.startswith("runner: "), results[name].detail
    assert len(created) == 3  # the batch, then each program once more alone, and no more


# -- comparisons: only floats have a tolerance --------------------------------------------------------------

def _task(task_id: str) -> dict:
    return next(t for t in load_tasks() if t["id"] == task_id)


def _wrapped(task: dict, transform: str) -> str:
    """The task's reference, its entry renamed, under an entry that returns ``transform(reference's value)``."""
    entry = task["entry"]
    return (task["reference"].replace(f"def {entry}(", f"def _reference_{entry}(") + "\n" + transform
            + f"\ndef {entry}(*args, **kwargs):\n    return transform(_reference_{entry}(*args, **kwargs))\n")


def _grade_task(docker_sandbox, task: dict, programs: dict[str, str]) -> dict[str, ProgramResult]:
    inputs = tuple(t["input"] for t in task["tests"])
    jobs = [ProgramJob(name, code, entry=task["entry"], call=task["call"], inputs=inputs)
            for name, code in programs.items()]
    return grade_programs(jobs, {job.key: [t["output"] for t in task["tests"]] for job in jobs}, docker_sandbox)


BUMP_BIG_INTS = '''
def transform(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v + 1 if abs(v) > 10**6 else v
    if isinstance(v, (list, tuple)):
        return [transform(x) for x in v]
    if isinstance(v, dict):
        return {k: transform(x) for k, x in v.items()}
    return v
'''


@pytest.mark.docker
def test_an_integer_off_by_one_fails_a_big_output_task(docker_sandbox) -> None:
    task = _task("codeio/253678fce574")  # every output an integer above 10^6
    results = _grade_task(docker_sandbox, task, {"reference": task["reference"],
                                                 "plus_one": _wrapped(task, BUMP_BIG_INTS)})
    assert results["reference"].status == "passed"
    assert (results["plus_one"].status, results["plus_one"].passed) == ("failed", 0)


NEAR_MISS_STRINGS = '''
def transform(v):
    if isinstance(v, str):
        return v[:-1] + chr(ord(v[-1]) ^ 1) if v else " "
    if isinstance(v, list):
        return [transform(x) for x in v]
    if isinstance(v, dict):
        return {k: transform(x) for k, x in v.items()}
    return v
'''

FLOAT_NOISE = '''
def transform(v):
    if isinstance(v, float):
        return v * (1 + 1e-9)
    if isinstance(v, list):
        return [transform(x) for x in v]
    if isinstance(v, dict):
        return {k: transform(x) for k, x in v.items()}
    return v
'''


@pytest.mark.docker
def test_a_string_near_miss_fails_and_float_noise_passes(docker_sandbox) -> None:
    strings, floats = _task("codeio/0e2241b97e1d"), _task("codeio/3fffd08b228c")
    near = _grade_task(docker_sandbox, strings, {"near_miss": _wrapped(strings, NEAR_MISS_STRINGS)})["near_miss"]
    assert (near.status, near.passed) == ("failed", 0)
    noisy = _grade_task(docker_sandbox, floats, {"noise": _wrapped(floats, FLOAT_NOISE)})["noise"]
    assert (noisy.status, noisy.passed) == ("passed", len(floats["tests"]))

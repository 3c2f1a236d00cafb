"""Held-out attacks on the code grader's speed changes (issue 46 III), written after they froze: the pidfd wait for
a program's end, the set-up objects the empty interpreter builds once (``Prepared``), the standard modules it
preloads, and the next program's process forked while the current one runs.  Each probe returns the right answer
only if its route worked, and the honest program right after it (which uses the preloaded modules) must pass.
"""

from __future__ import annotations

import pytest

from execution.programs import ProgramJob, ProgramLimits, grade_programs
from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
# honest, and leaning on what a poisoner would change: json, re, collections, typing, math from the zygote
HONEST = '''
import collections, json, math, re
from typing import Dict
def f(x) -> Dict[str, int]:
    assert json.loads(json.dumps({"a": [1]})) == {"a": [1]} and re.fullmatch(r"\\d+", "12")
    assert collections.Counter("aab")["a"] == 2 and math.factorial(4) == 24
    return {"y": x * 2}
'''

HELD_OUT = {
    # write the later tests' answers ahead, close every pipe the supervisor watches, then keep running: the
    # faster wait must still end it (a timeout), and no answer written ahead of its test may count
    "closes_its_pipes_and_lingers": '''
import os, time
def f(x):
    for i, y in ((1, 4), (2, 6)):
        os.write(3, b'{"event": "result", "i": %d, "value": "{\\\\"y\\\\": %d}"}\\n' % (i, y))
    for fd in (1, 2, 3):
        os.close(fd)
    time.sleep(30)
    return {"y": x * 2}
''',
    # the zygote's prepared libc, reached through the frames above the program: any system call without ctypes'
    # own audited routes (getpid here: harmless, but kill or prctl the same way)
    "calls_libc_through_the_zygote": '''
import sys
def f(x):
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            libc = getattr(value, "libc", None)
            if libc is not None:
                return {"y": x * 2} if libc.syscall(39) > 0 else None
        frame = frame.f_back
    return None
''',
    # poison the preloaded modules for whoever comes next: they are shared with the zygote, so a program that
    # could change them there would fail every later program
    "poisons_the_preloaded_modules": '''
import collections, json, math, re, typing
def f(x):
    json.dumps = json.loads = lambda *a, **k: None
    re.fullmatch = lambda *a, **k: None
    collections.Counter.__getitem__ = lambda self, key: -1
    math.factorial = lambda n: 0
    typing.Dict = None
    return None
''',
    # the next program's process is forked while this one runs and waits for its program on stdin: write a
    # program into that pipe first (through /proc/<pid>/fd/0), one that would return the right answers
    "writes_into_the_next_process": '''
import marshal, os
def f(x):
    payload = marshal.dumps({"program": {"index": 0, "code": "def f(x):\\n    return {'y': x * 2}\\n",
                                          "entry": "f", "call": "kwargs", "inputs": [{"x": 1}]},
                             "limits": {"memory_mb": 512, "cpu_s": 20}})
    hits = 0
    for pid in range(2, 4000):
        try:
            fd = os.open(f"/proc/{pid}/fd/0", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, payload)
            hits += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return {"y": x * 2} if hits else None
''',
}


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, HELD_OUT, HONEST, INPUTS, EXPECTED, limits=ProgramLimits(per_test_s=2.0))


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_a_held_out_attack_on_the_speed_changes_neither_passes_nor_sinks_the_next_program(graded, name) -> None:
    result = graded[name]
    assert result.verified == 0 and result.passed == 0, (result.status, result.tests, result.detail)
    after = graded[f"honest_after_{name}"]
    assert (after.status, after.passed) == ("passed", 3), (after.status, after.detail, after.errors)


@pytest.mark.docker
def test_the_honest_program_on_the_preloaded_modules_passes(graded) -> None:
    assert (graded["honest_first"].status, graded["honest_first"].passed) == ("passed", 3), graded["honest_first"]


# Found while checking the probe above, after the freeze: the zygote imported ctypes (its set-up needed it), so a
# program's ``import ctypes`` was a lookup in sys.modules with no audit event, and ``ctypes.memmove`` raises none per
# call: a program wrote its own memory.  Now the zygote confines through ``_program_confine`` and never imports
# ctypes, and the hook refuses its import (tests/test_code_grader_native.py has the other routes).
WRITES_ITS_OWN_MEMORY = '''
import ctypes
def f(x):
    s = bytes([97, 97, 97, 97])
    ctypes.memmove(id(s) + 32, b"bbbb", 4)  # into the bytes object's buffer: no audit event
    return {"y": x * 2} if s == b"bbbb" else None
'''


@pytest.mark.docker
def test_a_program_cannot_write_its_own_memory_past_the_audit_hook(docker_sandbox) -> None:
    jobs = [ProgramJob("memmove", WRITES_ITS_OWN_MEMORY, entry="f", inputs=INPUTS)]
    result = grade_programs(jobs, {"memmove": EXPECTED}, docker_sandbox, batch_size=1)["memmove"]
    assert result.verified == 0 and result.passed == 0, (result.status, result.detail)

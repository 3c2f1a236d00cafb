"""A program's own result frames (issue 46, Deliver 5): attacks on the result channel, written before its redesign.

The redesign they were written against: the supervisor sends a program's inputs one at a time, each only after the
answer to the one before; it frames the answers itself (the test an answer belongs to is the one whose input it
sent last, the clock is its own) and takes exactly one answer per input from the program's process; any other
frame on the channel ends the program ``forbidden`` with no test counted.  Each hostile program below returns a
wrong value from its function and tries to have a right one counted instead: by reading inputs ahead, by writing
frames of its own on whatever descriptor it finds (or floods, or writes before its function is called), by
routing the driver's own answers away, or through a child process.  Each is graded in one batch beside honest
programs (``tests/code_batches.py``); none may pass a test, and the honest program after each must pass.

On main before the redesign (442ef29) six of the eight won: ``reads_every_input_ahead``,
``writes_its_answer_on_every_pipe``, ``writes_before_its_function_runs`` and ``floods_the_channel`` passed every
test, the two that route the driver's answers away passed one each; the listing of ``/proc/self/fd`` and the child
were refused (``forbidden``).  After it, each ends ``failed`` (no input is in its memory ahead) or ``forbidden`` (a
frame too many, or the filter refusing to close or replace the channel).
"""

from __future__ import annotations

import pytest

from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

_FRAME = '''
import json, os
def frame(i, y):
    return (json.dumps({"event": "result", "i": i, "value": json.dumps({"y": y})}) + "\\n").encode()
'''

ATTACKS = {
    # the driver's inputs, found in a caller's frame (a list of marshalled dicts): answer every test at the first
    # call, with the start frames between, and return wrong values from then on
    "reads_every_input_ahead": '''
import json, marshal, os, sys
calls = [0]
def inputs_ahead():
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, list) and value and all(isinstance(v, bytes) for v in value):
                try:
                    found = [marshal.loads(v) for v in value]
                except Exception:
                    continue
                if all(isinstance(a, dict) and "x" in a for a in found):
                    return [a["x"] for a in found]
        frame = frame.f_back
    return []
def f(x):
    if calls[0] == 0:
        lines = []
        for i, v in enumerate(inputs_ahead()):
            if i:
                lines.append({"event": "start", "i": i})
            lines.append({"event": "result", "i": i, "value": json.dumps({"y": 2 * v})})
        if lines:
            os.write(3, "".join(json.dumps(line) + "\\n" for line in lines).encode())
    calls[0] += 1
    return {"y": -1}
''',
    # every pipe it holds (found by fstat, no path): the right answer to the current test as a frame on each, then
    # a wrong return
    "writes_its_answer_on_every_pipe": _FRAME + '''
import stat
calls = [0]
def f(x):
    i = calls[0]
    calls[0] += 1
    for fd in range(64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, frame(i, 2 * x))
        except OSError:
            pass
    return {"y": -1}
''',
    # the channel through /proc/self/fd, as a path
    "finds_the_channel_in_proc_self_fd": _FRAME + '''
calls = [0]
def f(x):
    i = calls[0]
    calls[0] += 1
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), frame(i, 2 * x))
        except OSError:
            pass
    return {"y": -1}
''',
    # module code, before its function is ever called: frames for every test from the inputs in a caller's frame,
    # and a frame that says the program loaded, so that its first input comes early
    "writes_before_its_function_runs": '''
import json, marshal, os, sys
lines = [{"event": "loaded"}]
frame = sys._getframe(0)
while frame is not None:
    for value in list(frame.f_locals.values()):
        if isinstance(value, list) and value and all(isinstance(v, bytes) for v in value):
            try:
                found = [marshal.loads(v) for v in value]
            except Exception:
                continue
            for i, a in enumerate(found):
                if isinstance(a, dict) and "x" in a:
                    lines += [{"event": "start", "i": i},
                              {"event": "result", "i": i, "value": json.dumps({"y": 2 * a["x"]})}]
    frame = frame.f_back
os.write(3, "".join(json.dumps(line) + "\\n" for line in lines).encode())
def f(x):
    return {"y": -1}
''',
    # the right answer to the current test, 200 times over (about 10 KB: under any output cap)
    "floods_the_channel": _FRAME + '''
calls = [0]
def f(x):
    i = calls[0]
    calls[0] += 1
    os.write(3, frame(i, 2 * x) * 200)
    return {"y": -1}
''',
    # keep a copy of the channel, put a pipe of its own in its place (the driver's wrong answers go there), and
    # write the right answers on the copy
    "routes_the_drivers_answers_away": _FRAME + '''
state = {}
def f(x):
    if "real" not in state:
        state["real"] = os.dup(3)
        r, w = os.pipe()
        state["decoy"] = (r, w)
        os.dup2(w, 3)
    i = state.get("i", 0)
    state["i"] = i + 1
    os.write(state["real"], frame(i, 2 * x))
    return {"y": -1}
''',
    # the same by closing the channel: the next pipe takes its number
    "closes_the_channel_and_takes_its_number": _FRAME + '''
state = {}
def f(x):
    if "real" not in state:
        state["real"] = os.dup(3)
        os.close(3)
        state["decoy"] = os.pipe()
    i = state.get("i", 0)
    state["i"] = i + 1
    os.write(state["real"], frame(i, 2 * x))
    return {"y": -1}
''',
    # a child inherits the channel and answers for it after the parent returned
    "a_child_answers_on_the_inherited_channel": _FRAME + '''
import time
calls = [0]
def f(x):
    i = calls[0]
    calls[0] += 1
    if os.fork() == 0:
        time.sleep(0.05)
        os.write(3, frame(i, 2 * x))
        os._exit(0)
    return {"y": -1}
''',
}


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, ATTACKS, HONEST, INPUTS, EXPECTED)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_program_that_writes_its_own_frames_passes_no_test(graded, name: str) -> None:
    result = graded[name]
    assert (result.verified, result.passed) == (0, 0), (result.status, result.tests, result.detail)
    after = graded[f"honest_after_{name}"]
    assert (after.status, after.passed) == ("passed", 3), (after.status, after.detail, after.errors)
    assert (graded["honest_first"].status, graded["honest_first"].passed) == ("passed", 3)

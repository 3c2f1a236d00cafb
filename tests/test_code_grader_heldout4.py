"""Held-out attacks on the code grader, fourth set (issue 46 III), written after the no-ctypes change froze (9f97439).

None of these routes was thought of while building it.  Each hostile program is graded in one batch beside honest
ones (``tests/code_batches.py``): it returns the right answer only if its route worked, or (``fills_the_shared_tmp``)
tries to turn the honest program after it; the honest program after each must still pass.
"""

from __future__ import annotations

import pytest

from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

HELD_OUT = {
    # the container's /tmp is one small tmpfs shared by every program of the batch: fill it through the program's
    # own folder (1 MB a file, its size limit) and keep it full while the next program's folder is made
    "fills_the_shared_tmp": '''
import os, time
def f(x):
    k = 0
    try:
        while k < 200:
            with open(f"fill-{x}-{k}", "wb") as out:
                out.write(b"\\0" * ((1 << 20) - 1))
            k += 1
    except OSError:
        pass
    time.sleep(2.5)
    return None
''',
    # write the result frames the driver would write, with right values, before the function returns a wrong one:
    # the supervisor read fd 3 and took the first result for the current test (won until the supervisor framed the
    # exchange itself, tests/test_code_grader_frames.py: the driver's own answer is now one frame too many)
    "forges_its_result_frames": '''
import os
def f(x):
    os.write(3, b'{"event": "result", "i": %d, "value": "{\\\\"y\\\\": %d}"}\\n' % (x - 1, 2 * x))
    return {"y": -1}
''',
    # the next program's folder through another process's cwd link (readlink raises no audit event and landlock
    # does not govern it): plant the answer there, or at least learn the name
    "finds_the_next_folder_by_proc_cwd": '''
import os
def f(x):
    mine = os.getcwd()
    for pid in range(1, 4000):
        try:
            where = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if where.startswith("/tmp/programs/") and where != mine:
            return {"y": x * 2}
    return None
''',
    # a socket of the abstract namespace, which every process of the container shares (no file, so no landlock)
    "binds_an_abstract_socket": '''
def f(x):
    import _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    s.bind(b"\\0sibling-mailbox")
    return {"y": x * 2}
''',
    # patch os._exit, which the driver calls after the last test so that nothing of the program outlives it; then a
    # thread of its own answers the tests while the function returns wrong values (won until the same change)
    "outlives_its_tests_through_os_exit": '''
import os, threading
def f(x):
    os._exit = lambda code: None
    def late():
        for i, y in ((0, 2), (1, 4), (2, 6)):
            try:
                os.write(3, b'{"event": "result", "i": %d, "value": "{\\\\"y\\\\": %d}"}\\n' % (i, y))
            except OSError:
                pass
    threading.Thread(target=late).start()
    return {"y": 0}
''',
}

# a float task: the same inputs, outputs 2.0, 4.0, 6.0; the hostile answer is an integer too large for a float
FLOAT_EXPECTED = [{"y": 2.0}, {"y": 4.0}, {"y": 6.0}]
FLOAT_HONEST = "def f(x):\n    return {'y': x * 2.0}\n"
HUGE_INT = "def f(x):\n    return {'y': 10 ** 400}\n"


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, HELD_OUT, HONEST, INPUTS, EXPECTED)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_a_held_out_attack_neither_passes_nor_turns_the_next_program(graded, name: str) -> None:
    result = graded[name]
    assert result.verified == 0 and result.passed == 0, (result.status, result.tests, result.detail)
    after = graded[f"honest_after_{name}"]
    assert (after.status, after.passed) == ("passed", 3), (after.status, after.detail, after.errors)


# Won in the held-out run (math.isclose raised OverflowError on the host and the whole batch's grade failed, honest
# programs too); ``same_value`` now calls such an integer unequal.  Fixed after the held-out run: not held-out tested.
@pytest.mark.docker
def test_an_integer_too_large_for_a_float_fails_alone(docker_sandbox) -> None:
    graded = between_honest(docker_sandbox, {"huge_int": HUGE_INT}, FLOAT_HONEST, INPUTS, FLOAT_EXPECTED)
    assert (graded["huge_int"].status, graded["huge_int"].passed) == ("failed", 0), graded["huge_int"]
    assert (graded["honest_after_huge_int"].status, graded["honest_after_huge_int"].passed) == ("passed", 3)

"""Held-out attacks on the code grader's users (issue 46 Deliver 5), written after the uid split froze: each probe
returns the right answer only if its route worked, graded in one batch between honest programs.
"""

from __future__ import annotations

import pytest

from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

HELD_OUT = {
    # take the supervisor's uid (or root's) back: no audit event names setresuid
    "takes_a_uid_back": '''
import os
def f(x):
    for uid in (0, 65534, os.stat("..").st_uid):
        try:
            os.setresuid(uid, uid, uid)
            return {"y": x * 2}
        except OSError:
            pass
    return None
''',
    # threads until the container's pids are gone, so the next program's process cannot be forked
    "thread_bomb": '''
import threading, time
def f(x):
    threading.stack_size(65536)
    n = 0
    try:
        for _ in range(500):
            threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
            n += 1
    except RuntimeError:
        pass
    time.sleep(0.5)
    return {"y": x * 2} if n >= 60 else None
''',
    # lock the supervisor out of the program's folder: owner-only, then no rights at all, its files unremovable
    "locks_its_folder": '''
import os
def f(x):
    os.makedirs("a/b", exist_ok=True)
    with open("a/b/f", "w") as out:
        out.write("x")
    os.chmod("a/b", 0)
    os.chmod("a", 0)
    os.chmod(".", 0)
    return None
''',
    # a file in the shared folder above, where the next program's folder will be made
    "writes_beside_its_folder": '''
import os
def f(x):
    try:
        fd = os.open("../planted", os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
        return {"y": x * 2}
    except OSError:
        return None
''',
}


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, HELD_OUT, HONEST, INPUTS, EXPECTED)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_a_held_out_attack_on_the_users_neither_passes_nor_sinks_the_next_program(graded, name):
    assert graded[name].passed == 0, graded[name]
    assert graded[f"honest_after_{name}"].status == "passed", graded[f"honest_after_{name}"]
    assert graded["honest_first"].status == "passed"

"""Attacks through the empty interpreter (the zygote every program's process is forked from), issue 46 III.

The zygote has imported only trusted modules and never holds a program: it receives a folder, a uid and three
pipe ends per program.  Each probe returns the right answer only if its route reached something of another
program (its code, by a marker only the honest sibling's code holds) or a way to act on the zygote; graded in
one batch after an honest program, and the honest program after each probe must still pass.
"""

from __future__ import annotations

import pytest

from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
MARK = "sibling-marker-5f0c2a"
HONEST = f"def f(x):\n    note = {MARK!r}\n    return {{'y': x * 2}}\n"

PROBES = {
    # everything reachable from the frames above the program (the zygote's serve loop and its forks) and from
    # every module the zygote imported: a string holding the sibling's marker
    "zygote_memory_by_frames": '''
import sys
HEAD, TAIL = "sibling-", "marker-5f0c2a"  # in two pieces: the probe itself holds no string with the marker
def holds(text):
    at = text.find(HEAD)
    return at >= 0 and text[at + len(HEAD):].startswith(TAIL)
def walk(value, seen, depth):
    if id(value) in seen or depth > 4:
        return False
    seen.add(id(value))
    if isinstance(value, (str, bytes)):
        return holds(value if isinstance(value, str) else value.decode("latin-1"))
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set)) else ()
    try:
        return any(walk(v, seen, depth + 1) for v in list(items))
    except Exception:
        return False
def f(x):
    seen = set()
    roots = [m.__dict__ for m in list(sys.modules.values()) if hasattr(m, "__dict__")]
    frame = sys._getframe()
    while frame is not None:
        roots += [frame.f_locals, frame.f_globals]
        frame = frame.f_back
    return {"y": x * 2} if any(walk(r, seen, 0) for r in roots) else None
''',
    # the zygote's control socket, if a forked process kept it: ask for a process in another folder, or end the
    # zygote with a message it cannot parse (then the next programs could not be forked)
    "zygote_control_socket": '''
import os, stat
def f(x):
    hits = 0
    for fd in range(4, 1024):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, b"/tmp/programs\\n0")
                hits += 1
        except OSError:
            pass
    return {"y": x * 2} if hits else None
''',
    # the zygote's process: its /proc entries (environment, memory map, descriptors) by any pid in the container
    "zygote_process": '''
import os
def f(x):
    for pid in range(1, 400):
        for name in ("environ", "maps", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as got:
                    if got.read(1):
                        return {"y": x * 2}
            except OSError:
                pass
    return None
''',
}


# the frames probe in a process that does hold the marker (a string of its own): it finds it and passes
CONTROL = PROBES["zygote_memory_by_frames"] + "KEEP = 'sibling-' 'marker-5f0c2a'\n"


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, PROBES, HONEST, INPUTS, EXPECTED, extra={"control": CONTROL})


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(PROBES))
def test_a_program_reaches_nothing_of_another_through_the_zygote(graded, name: str) -> None:
    result = graded[name]
    assert result.verified == 0 and result.passed == 0, (result.status, result.detail)
    after = graded[f"honest_after_{name}"]
    assert (after.status, after.passed) == ("passed", 3), after.detail


@pytest.mark.docker
def test_the_honest_program_passes_and_the_probe_finds_a_marker_its_own_process_holds(graded) -> None:
    assert (graded["honest_first"].status, graded["honest_first"].passed) == ("passed", 3)
    assert (graded["control"].status, graded["control"].passed) == ("passed", 3), graded["control"].detail

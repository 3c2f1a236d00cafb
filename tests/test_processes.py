"""A recorded pid names the recorded process only while its identity (boot + start time) still matches."""

from __future__ import annotations

import os
import subprocess
import sys

from sandboxes.processes import identity, running


def test_a_live_process_with_its_identity_is_running() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        recorded = identity(child.pid)
        assert recorded is not None and recorded != identity(os.getpid())
        assert running(child.pid, recorded) and running(child.pid)  # no identity recorded: any live process
    finally:
        child.kill()
        child.wait()


def test_a_zombie_a_reaped_child_and_bad_pids_are_not_running() -> None:
    child = subprocess.Popen(["true"])
    recorded = identity(child.pid)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped: a zombie
    assert not running(child.pid, recorded) and not running(child.pid)
    child.wait()
    assert not running(child.pid, recorded) and identity(child.pid) is None
    for pid in (0, -1, "x", None, 2**40):
        assert not running(pid)


def test_a_pid_now_owned_by_another_process_is_not_the_recorded_one() -> None:
    """What a pid reused after the recorded process exited (or after a reboot) looks like: same pid, other start."""
    me = identity(os.getpid())
    assert me is not None
    boot, start = me.rsplit(":", 1)
    assert not running(os.getpid(), f"{boot}:{int(start) + 1}")
    assert not running(os.getpid(), f"another-boot:{start}")
    assert running(os.getpid(), me)

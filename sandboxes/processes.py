"""Whether a process recorded earlier by its pid still runs (Linux ``/proc``).

The kernel hands a pid out again once its process exits, and a reboot starts counting afresh, so a
recorded pid alone can name a stranger.  Record ``identity(pid)`` beside it (the boot and the
process's start time) and ask ``running(pid, identity)`` later::

    job = {"pid": proc.pid, "identity": identity(proc.pid)}
    ...
    if running(job["pid"], job["identity"]): ...   # the same process, not a zombie
"""

from __future__ import annotations

import os
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def identity(pid: int) -> str | None:
    """``<boot id>:<start time in clock ticks>`` of process ``pid``, or None if there is no such process."""
    try:
        return f"{BOOT_ID.read_text().strip()}:{_stat_fields(pid)[19]}"
    except (OSError, IndexError):
        return None


def running(pid: object, recorded: str | None = None) -> bool:
    """Whether ``pid`` names a live process (an exited one not yet reaped, a zombie, is not), and the same one
    as when ``recorded`` was taken; with no identity recorded (older records), any live process counts.
    Without ``/proc`` (not Linux) only the pid's existence can be checked, as before identities were recorded."""
    if not BOOT_ID.exists():
        return _exists(pid)
    try:
        state = _stat_fields(int(pid))[0]  # type: ignore[call-overload]
    except (OSError, ValueError, TypeError, IndexError):
        return False
    return state != "Z" and (recorded is None or recorded == identity(int(pid)))  # type: ignore[call-overload]


def _stat_fields(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` from its third field (state) on; the command name before it may hold spaces."""
    if pid <= 0:
        raise ValueError(f"no process has pid {pid}")
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _exists(pid: object) -> bool:
    try:
        number = int(pid)  # type: ignore[call-overload]
        if number <= 0:
            return False  # 0 and negatives name process groups, not a process
        os.kill(number, 0)
    except PermissionError:
        return True  # another user's process
    except (OSError, ValueError, TypeError, OverflowError):
        return False
    return True

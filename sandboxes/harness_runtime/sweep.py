"""After every request: kill what harness code left, drop System V IPC, restore the writable places."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
"""Where harness code can write in the container (its root filesystem is read-only)."""


class Snapshot:
    """What the container's writable places held before any request: restored after every request."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple] = {}
        for top in WRITABLE:
            for path in _walk(top):
                st = os.lstat(path)
                content = Path(path).read_bytes() if _is_file(st) else None
                self.entries[path] = (st.st_mode, content, _stamp(st))

    def restore(self) -> None:
        """Remove what a request's processes added, and put back what they changed or removed."""
        import shutil

        for top in WRITABLE:
            for path in sorted(_walk(top), key=len, reverse=True):
                if path in self.entries:
                    continue
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if _is_dir(st):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
        for path, (mode, content, stamp) in sorted(self.entries.items()):
            try:
                st = os.lstat(path)
            except OSError:
                st = None
            if st is not None and _stamp(st) == stamp:
                continue
            with contextlib.suppress(OSError):
                if content is None:
                    os.makedirs(path, exist_ok=True)
                else:
                    if st is not None and not _is_file(st):
                        shutil.rmtree(path) if _is_dir(st) else os.unlink(path)
                    with open(path, "wb") as f:
                        f.write(content)
                os.chmod(path, mode & 0o7777)
                self.entries[path] = (mode, content, _stamp(os.lstat(path)))


def _walk(top: str) -> list[str]:
    out: list[str] = []
    if not os.path.isdir(top):
        return out
    for folder, dirs, files in os.walk(top, followlinks=False):
        out += [os.path.join(folder, name) for name in dirs + files]
    return out


def _is_file(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def _is_dir(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISDIR(st.st_mode)


def _stamp(st: os.stat_result) -> tuple:
    # ctime moves on every write, chmod or utime, and no process can set it back
    return (st.st_mode, st.st_size, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)


def sweep(keep: set[int], snapshot: Snapshot | None) -> None:
    """After a request: kill every process of the container but the runtime's own (``keep``: the reader, its
    workers and snapshots), reap them, drop System V IPC objects, and restore the writable files."""
    me = os.getpid()
    if me != 1 or snapshot is None:  # not alone in a container of its own (``serve``): nothing is ours to sweep
        return
    for _ in range(200):
        strays = [pid for pid in _pids() if pid != me and pid not in keep]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        import time
        time.sleep(0.001)
    _reap()
    _drop_ipc()
    if snapshot is not None:
        snapshot.restore()


def _pids() -> list[int]:
    """The container's live processes (zombies are dead: only their parent's wait remains)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            out.append(int(name))
    return out


def _reap() -> None:
    """Wait for every finished child of this process (strays are reparented to it: it is the container's init)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _drop_ipc() -> None:
    """System V shared memory, queues and semaphores outlive their makers: remove every one."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for table, remove in (("shm", lambda i: libc.shmctl(i, 0, None)), ("msg", lambda i: libc.msgctl(i, 0, None)),
                          ("sem", lambda i: libc.semctl(i, 0, 0))):
        try:
            lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1 and fields[1].isdigit():
                remove(int(fields[1]))  # IPC_RMID

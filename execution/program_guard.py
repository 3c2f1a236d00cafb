"""The audit hook a code-grader program runs under: it ends the process on what the kernel's layers may not see.

Runs in the grading container beside ``program_driver.py``; standard library only.  Installed by the program's
process after its confinement (``program_confinement``) and before its program's code runs.
"""

from __future__ import annotations

import os
import sys

VIOLATION_EXIT = 86

NATIVE_REFUSED = frozenset((
    "ctypes", "_ctypes", "_ctypes_test", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testclinic", "_testimportmultiple", "_testsinglephase", "_xxtestfuzz", "_xxsubinterpreters",
    "_xxinterpchannels", "xxlimited", "xxlimited_35", "_program_confine"))
"""Modules no program may load: ctypes writes any memory and calls any C function with no audit event; CPython's
test modules have entry points made to break its rules; a subinterpreter runs code without this hook (hooks
are per interpreter).  Any of them would switch the hook off; the kernel's layers would still hold."""


def install_guard(work: str, read_roots: tuple[str, ...], out_fd: int, dumps) -> None:
    """An audit hook that ends the process on anything outside the program's folder and Python's library.

    Every name it uses is bound now, as a default argument, so a candidate that rebinds
    builtins or ``os`` functions cannot change what the hook does.
    """
    blocked = ("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
               "os.kill", "os.killpg", "signal.pthread_kill", "socket.", "ctypes.", "gc.get_objects",
               "gc.get_referrers", "gc.get_referents", "sys.setprofile", "sys.settrace", "os.setuid",
               "resource.setrlimit", "resource.prlimit", "os.symlink", "os.link", "os.chdir", "os.chroot",
               "sys.remote_exec", "sqlite3.enable_load_extension", "sqlite3.load_extension")
    path_events = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
                   "os.chmod", "os.chown", "os.truncate", "os.utime", "shutil.rmtree", "os.walk", "glob.glob")
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def normal(path, _str=str, _bytes=bytes, _isinstance=isinstance, _work=work):
        if _isinstance(path, _bytes):
            path = path.decode("utf-8", "replace")
        path = _str(path)
        if not path.startswith("/"):
            path = _work + "/" + path
        parts: list = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
        return "/" + "/".join(parts)

    def inside(path, roots, _any=any):
        return _any(path == r or path.startswith(r + "/") for r in roots)

    def stop(why, _write=os.write, _exit=os._exit, _dumps=dumps, _fd=out_fd, _code=VIOLATION_EXIT):
        try:
            _write(_fd, (_dumps({"event": "violation", "detail": why[:300]}) + "\n").encode())
        finally:
            _exit(_code)

    def hook(event, args, _blocked=blocked, _paths=path_events, _normal=normal, _inside=inside, _stop=stop,
             _work=(work,), _read=read_roots, _isinstance=isinstance, _int=int, _str=str, _wf=write_flags,
             _len=len, _any=any, _bool=bool, _native=NATIVE_REFUSED):
        if event.startswith(_blocked):
            _stop(f"{event} is not allowed")
        if event == "import" and args:  # raised for every module not yet loaded, and again by each extension's load
            name = _str(args[0]).rpartition(".")[2]  # an extension's init function is named by this part alone
            origin = args[1] if _len(args) > 1 and _isinstance(args[1], _str) else ""
            if name in _native:
                _stop(f"import {name} is not allowed")
            if origin.endswith(".so") and not _inside(_normal(origin), _read):
                _stop(f"an extension module outside Python's library: {origin[:200]}")
            return
        if event not in _paths or not args:
            return
        target = args[0]
        if _isinstance(target, _int) or target is None:
            return
        path = _normal(target)
        writing = event != "open" and event not in ("os.listdir", "os.scandir", "os.walk", "glob.glob")
        if event == "open":
            mode = args[1] if _len(args) > 1 else None
            flags = args[2] if _len(args) > 2 else 0
            writing = (_isinstance(mode, _str) and _any(c in mode for c in "wax+")) or _bool((flags or 0) & _wf)
        if _inside(path, _work) or (not writing and _inside(path, _read)):
            return
        _stop(f"{event} {'writes' if writing else 'reads'} {path[:200]} outside the program's folder")

    sys.addaudithook(hook)

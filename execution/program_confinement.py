"""A code-grader program's process confines itself: its own uid, its rlimits, a landlock domain and a seccomp filter.

Runs in the grading container beside ``program_driver.py`` (standard library only, and the confinement module
``_program_confine`` built from ``program_confine.c``).  The empty interpreter builds ``Prepared`` once; each forked
program's process then calls, in order, ``become``, ``apply_limits``, ``landlock`` and ``confine`` before any of
its program's code runs (``program_driver.main``).
"""

from __future__ import annotations

import os
import resource
import struct
import sys

CONFINE_MODULE = "_program_confine.abi3.so"
"""The confinement module (``program_confine.c``), built on the host and mounted beside this file."""
MAX_THREADS = 32
"""RLIMIT_NPROC of a program's uid (its own): the threads it may hold, so it cannot take the container's pids."""

# The seccomp filter's system calls, by architecture.  The supervisor shares the programs' uid, so the kernel
# lets a program signal it, trace it, or change its limits and scheduling unless the call itself is refused:
#   denied       create a process or run a binary, signal any process, ptrace, cross-process memory,
#                another process's priority, an anonymous memory file (memfd_create: the one file of its own a
#                program could have mapped executable, its folder's /tmp being noexec);
#   self_only    allowed with pid 0 (this process) only: prlimit64 (resource.getrlimit uses it), scheduling;
#   fcntl/ioctl  allowed but for F_SETOWN, F_SETSIG, F_SETOWN_EX and FIOSETOWN/SIOCSPGRP (SIGIO sent to
#                another pid);
#   clone        allowed with CLONE_THREAD only (threads); clone3 answers ENOSYS, so the C library falls
#                back to clone, whose flags a filter can read;
#   channel      close, dup2, dup3 and close_range allowed unless they would close the result channel (fd 3) or put
#                another file in its place: the driver's own answer to each input always reaches the supervisor,
#                so a frame the program writes there itself is one too many (``program_watch``).
_SYSCALLS = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "clone3": 435, "fcntl": 72, "ioctl": 16,
               "close": 3, "replace": (33, 292), "close_range": 436,
               "denied": (57, 58, 59, 322, 62, 200, 234, 129, 297, 424, 434, 438, 101, 310, 311, 141, 251, 256,
                          279, 440, 319),
               "self_only": (302, 203, 144, 142, 314)},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "clone3": 435, "fcntl": 25, "ioctl": 29,
                "close": 57, "replace": (24,), "close_range": 436,
                "denied": (221, 281, 129, 130, 131, 138, 240, 424, 434, 438, 117, 270, 271, 140, 30, 238, 239, 440,
                           279),
                "self_only": (261, 122, 119, 118, 274)},
}
CLONE_THREAD = 0x10000
OWNER_FCNTLS = (8, 10, 15)  # F_SETOWN, F_SETSIG, F_SETOWN_EX
OWNER_IOCTLS = (0x8901, 0x8902)  # FIOSETOWN, SIOCSPGRP
RESULT_FD = 3
"""The program's result channel (``program_driver.RESULT_FD``)."""


def _filter(machine: str) -> list[bytes]:
    """The classic-BPF program of the seccomp filter for ``machine`` (``os.uname().machine``)."""
    calls = _SYSCALLS[machine]
    kill, allow, enosys = 0x80000000, 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_KILL_PROCESS, ALLOW, ERRNO(ENOSYS)
    ld, jeq, jgt, jge, jset, ret = 0x20, 0x15, 0x25, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGT/JGE/JSET|K, RET
    arg0, arg1 = 16, 24  # low words of seccomp_data.args[0] and [1] (little-endian)

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    def refuse(offset: int, values: tuple) -> list[bytes]:  # the argument at offset is none of values
        return ([op(ld, offset)] + [op(jeq, v, len(values) - i, 0) for i, v in enumerate(values)]
                + [op(ret, allow), op(ret, kill)])

    blocks = [(calls["clone3"], [op(ret, enosys)]),
              (calls["clone"], [op(ld, arg0), op(jset, CLONE_THREAD, 0, 1), op(ret, allow), op(ret, kill)]),
              (calls["fcntl"], refuse(arg1, OWNER_FCNTLS)), (calls["ioctl"], refuse(arg1, OWNER_IOCTLS))]
    blocks += [(nr, [op(ld, arg0), op(jeq, 0, 0, 1), op(ret, allow), op(ret, kill)]) for nr in calls["self_only"]]
    # the kernel reads these descriptors as unsigned int, the low word alone: what the filter compares
    blocks.append((calls["close"], [op(ld, arg0), op(jeq, RESULT_FD, 0, 1), op(ret, kill), op(ret, allow)]))
    blocks += [(nr, [op(ld, arg1), op(jeq, RESULT_FD, 0, 1), op(ret, kill), op(ret, allow)]) for nr in calls["replace"]]
    blocks.append((calls["close_range"], [op(ld, arg0), op(jgt, RESULT_FD, 3, 0),  # first > 3: allowed
                                          op(ld, arg1), op(jge, RESULT_FD, 0, 1), op(ret, kill), op(ret, allow)]))
    prog = [op(ld, 4), op(jeq, calls["arch"], 1, 0), op(ret, kill),  # another ABI's numbers mean other calls
            op(ld, 0), op(jge, 0x40000000, 0, 1), op(ret, kill)]  # x32 calls on x86_64
    for nr, block in blocks:  # every block ends in a return, so the accumulator still holds nr past it
        prog += [op(jeq, nr, 0, len(block))] + block
    denied = calls["denied"]
    prog += [op(jeq, nr, len(denied) - i, 0) for i, nr in enumerate(denied)]
    return prog + [op(ret, allow), op(ret, kill)]


LANDLOCK = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
"""The same numbers on x86_64 and aarch64 (system calls added since Linux 5.13 share one table)."""
READ = (1 << 0) | (1 << 2) | (1 << 3)  # EXECUTE, READ_FILE, READ_DIR
FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14)  # the rights a rule on a file (not a folder) may hold


def read_roots() -> tuple[str, ...]:
    """What a program may read besides its folder: Python's library and the few files it opens by itself."""
    return tuple(sorted({p for p in sys.path if p.startswith("/usr") or p.startswith("/opt")}
                        | {"/usr/lib/python3.11", "/usr/share/zoneinfo", "/dev/null", "/dev/urandom"}))


def landlock(prepared: "Prepared", work: str) -> str:
    """Let the kernel refuse every file outside ``work`` (read and write) and the read roots (read only).

    The audit hook only sees the files Python's own calls open; C code that opens files by itself (``readline``'s
    history files, for one) raises no event.  Landlock needs no privilege (no_new_privs is set) and holds for
    this process whatever runs in it.  Returns "landlock", or "hook only" on a kernel without it (then the audit
    hook is the one guard, as before).  Everything but the folder's rule and the descriptors was built once, in
    the empty interpreter (``Prepared``)."""
    if prepared.handled is None:
        return "hook only"
    native = prepared.native
    try:
        ruleset = native.landlock_ruleset(prepared.handled)
    except OSError:
        return "hook only"
    try:
        for path, rights in [(work, prepared.handled), *prepared.read_rules]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a sys.path entry that does not exist: nothing to allow
            try:
                native.landlock_allow(ruleset, fd, rights)
            finally:
                os.close(fd)
        native.landlock_restrict(ruleset)
    finally:
        os.close(ruleset)
    return "landlock"


def apply_limits(limits: dict) -> None:
    memory = int(limits["memory_mb"]) << 20
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_THREADS, MAX_THREADS))  # counts this uid's tasks: its own


def become(uid: int) -> None:
    """Drop to ``uid`` for good (real, effective and saved ids, gid the same, no groups); raise unless no
    capability is left (a uid change away from 0 clears them: this checks the kernel did)."""
    if uid <= 0 or uid == os.getuid():
        raise PermissionError(f"refusing to run a program as uid {uid}, its supervisor's or root's")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)  # 0444 even for a non-dumpable process
    try:
        status = os.read(fd, 1 << 16)  # a raw read: no file object to build in each program's process
    finally:
        os.close(fd)
    caps = [line.split()[1] for line in status.splitlines() if line.startswith((b"CapPrm:", b"CapEff:", b"CapAmb:"))]
    if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3 or os.getgroups() or len(caps) != 3 \
            or any(int(cap, 16) for cap in caps):
        raise PermissionError(f"uid {uid} not taken cleanly: {os.getresuid()} {os.getgroups()} caps {caps}")


class Prepared:
    """What every program's set-up needs, built once in the empty interpreter before it forks: the seccomp
    program, the confinement module, the landlock ABI, handled rights and read rules.  A forked process only uses
    them.  None of it holds anything of a program.

    The system calls go through ``_program_confine`` (``program_confine.c``, built on the host), never ctypes:
    ctypes imported here would stay reachable from every forked program, its classes through
    ``object.__subclasses__`` after any clean-up, and ``ctypes.memmove`` writes memory with no audit event (the
    hook switched off from inside).  The module can only take rights away from the process that calls it."""

    def __init__(self, machine: str) -> None:
        self.native = native = load_native()
        self.filter = b"".join(_filter(machine))
        abi = native.landlock_abi()  # below 1: a kernel without landlock
        self.handled: int | None = None
        self.read_rules: tuple[tuple[str, int], ...] = ()
        if abi >= 1:
            handled = (1 << 13) - 1 | ((1 << 13) if abi >= 2 else 0) | ((1 << 14) if abi >= 3 else 0)
            self.handled = handled
            self.read_rules = tuple((root, READ & handled & (~0 if os.path.isdir(root) else FILE_RIGHTS))
                                    for root in read_roots())


def load_native():
    """The confinement module beside this file, loaded without entering ``sys.modules`` for good (no program finds it
    by name; the hook refuses its name too)."""
    import _frozen_importlib as bootstrap
    import _frozen_importlib_external as external

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CONFINE_MODULE)
    loader = external.ExtensionFileLoader("_program_confine", path)
    module = loader.create_module(bootstrap.spec_from_loader("_program_confine", loader, origin=path))
    sys.modules.pop("_program_confine", None)
    return module


def confine(prepared: Prepared) -> None:
    """Install the seccomp filter on this process (with no_new_privs, no capability is needed); raises if not."""
    prepared.native.no_new_privs()
    prepared.native.seccomp_filter(prepared.filter)

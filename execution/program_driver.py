"""The program's side of the code grader: an empty interpreter that forks one process per candidate program.

Standard library only, and the confinement module built from ``program_confine.c`` (mounted beside it; it makes
the system calls a program's set-up needs, where ctypes once did).  ``program_runner.py`` (the supervisor) starts
it once per batch, as::

    python3 -S -s -B -P /grader/program_driver.py serve CONTROL_FD

It makes itself non-dumpable (inherited by every fork: no program can reach its memory through
``/proc``), loads what a program's set-up needs, and then only ever receives, per program, a folder, a uid
and three pipe ends; it forks a process there (forked twice over, so that the supervisor, a subreaper, is its
parent).  That process drops to the uid (gid the same, no supplementary groups: every capability it had
is cleared; it refuses to go on if any is left), so the kernel refuses it any signal, trace or ``/proc`` read
of a process of the supervisor's or another program's uid, and its uid's process limit caps its threads
(``MAX_THREADS``).  It then reads its program on stdin (``marshal``: code, entry, call convention, inputs,
limits; nothing of any other program, and no expected value), and before the program's code runs it
takes its rlimits and installs

- a **seccomp filter**: creating a process (fork, vfork, clone without ``CLONE_THREAD``, exec), sending any
  signal (kill, tkill, tgkill, sigqueue, pidfd, SIGIO through ``F_SETOWN``), ptrace, cross-process memory,
  and changing another process's limits or scheduling kill it with SIGSYS; threads stay allowed;
- a **landlock ruleset** (where the kernel has it: Linux 5.13 and later): the kernel refuses every file
  outside its folder (read and write) and Python's library (read only), whatever code opens it, C included
  (``readline``'s history files raise no audit event); ``ready`` says ``files: landlock`` or ``hook only``;
- an **audit hook** (which cannot be removed) that ends it with ``VIOLATION_EXIT`` on gc object walks, files
  touched outside its folder and Python's own library, and loading ctypes, CPython's test modules, a
  subinterpreter or an extension module from anywhere but Python's library (``NATIVE_REFUSED``).  Its own set-up
  never imports ctypes (``Prepared``), so no program finds a way to write its own memory already loaded.

It reports on its results pipe (fd 3), one JSON line per event: ``ready`` (its set-up is done; only now can program
code run) or ``setup_error``; then ``start``/``result`` per test, or what ended the program first.

The start of each program is the grader's cost, and in a fork it is mostly pages copied on first write: so the
empty interpreter builds what every set-up needs once (``Prepared``), imports the standard modules programs
often import (``PRELOADED``), and freezes its objects out of the collector's reach before it forks.
"""

from __future__ import annotations

import marshal
import os
import resource
import struct
import sys

VIOLATION_EXIT = 86
PRELOADED = ("bisect", "collections", "functools", "heapq", "itertools", "json", "math", "re", "string", "typing")
"""Standard modules the empty interpreter imports before it forks (``typing`` cost each program that imported it
about 9 ms of CPU, ``json`` 7, ``string`` 6; all of them once, about 10 ms per batch).  Only modules with no
state a program could learn anything from: not ``random``, whose seed every fork would share."""
CONFINE_MODULE = "_program_confine.abi3.so"
"""The confinement module (``program_confine.c``), built on the host and mounted beside this file."""
MAX_THREADS = 32
"""RLIMIT_NPROC of a program's uid (its own): the threads it may hold, so it cannot take the container's pids."""


def _c_encoder():
    """``json.dumps(value, allow_nan=False)`` without importing ``json`` (and ``re``): the same C encoder."""
    try:
        from _json import encode_basestring_ascii, make_encoder
    except ImportError:  # a Python without the accelerator: the package it would have used anyway
        import json

        return lambda value: json.dumps(value, allow_nan=False)

    def default(value):
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    def dumps(value, _make=make_encoder, _encode=encode_basestring_ascii, _default=default, _join="".join):
        return _join(_make({}, _default, _encode, None, ": ", ", ", False, False, False)(value, 0))
    return dumps


_dumps = _c_encoder()


# The seccomp filter's system calls, by architecture.  The supervisor shares the programs' uid, so the kernel
# lets a program signal it, trace it, or change its limits and scheduling unless the call itself is refused:
#   denied       create a process or run a binary, signal any process, ptrace, cross-process memory,
#                another process's priority;
#   self_only    allowed with pid 0 (this process) only: prlimit64 (resource.getrlimit uses it), scheduling;
#   fcntl/ioctl  allowed but for F_SETOWN, F_SETSIG, F_SETOWN_EX and FIOSETOWN/SIOCSPGRP (SIGIO sent to
#                another pid);
#   clone        allowed with CLONE_THREAD only (threads); clone3 answers ENOSYS, so the C library falls
#                back to clone, whose flags a filter can read.
_SYSCALLS = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "clone3": 435, "fcntl": 72, "ioctl": 16,
               "denied": (57, 58, 59, 322, 62, 200, 234, 129, 297, 424, 434, 438, 101, 310, 311, 141, 251, 256,
                          279, 440),
               "self_only": (302, 203, 144, 142, 314)},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "clone3": 435, "fcntl": 25, "ioctl": 29,
                "denied": (221, 281, 129, 130, 131, 138, 240, 424, 434, 438, 117, 270, 271, 140, 30, 238, 239, 440),
                "self_only": (261, 122, 119, 118, 274)},
}
CLONE_THREAD = 0x10000
OWNER_FCNTLS = (8, 10, 15)  # F_SETOWN, F_SETSIG, F_SETOWN_EX
OWNER_IOCTLS = (0x8901, 0x8902)  # FIOSETOWN, SIOCSPGRP


def _filter(machine: str) -> list[bytes]:
    """The classic-BPF program of the seccomp filter for ``machine`` (``os.uname().machine``)."""
    calls = _SYSCALLS[machine]
    kill, allow, enosys = 0x80000000, 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_KILL_PROCESS, ALLOW, ERRNO(ENOSYS)
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
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


def _read_roots() -> tuple[str, ...]:
    """What a program may read besides its folder: Python's library and the few files it opens by itself."""
    return tuple(sorted({p for p in sys.path if p.startswith("/usr") or p.startswith("/opt")}
                        | {"/usr/lib/python3.11", "/usr/share/zoneinfo", "/dev/null", "/dev/urandom"}))


def _landlock(prepared: "Prepared", work: str) -> str:
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


def _apply_limits(limits: dict) -> None:
    memory = int(limits["memory_mb"]) << 20
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_THREADS, MAX_THREADS))  # counts this uid's tasks: its own


def _become(uid: int) -> None:
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
        self.native = native = _load_confine()
        self.filter = b"".join(_filter(machine))
        abi = native.landlock_abi()  # below 1: a kernel without landlock
        self.handled: int | None = None
        self.read_rules: tuple[tuple[str, int], ...] = ()
        if abi >= 1:
            handled = (1 << 13) - 1 | ((1 << 13) if abi >= 2 else 0) | ((1 << 14) if abi >= 3 else 0)
            self.handled = handled
            self.read_rules = tuple((root, READ & handled & (~0 if os.path.isdir(root) else FILE_RIGHTS))
                                    for root in _read_roots())


def _load_confine():
    """The confinement module beside this file, loaded without entering ``sys.modules`` for good (no program finds it
    by name; the hook refuses its name too)."""
    import _frozen_importlib as bootstrap
    import _frozen_importlib_external as external

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CONFINE_MODULE)
    loader = external.ExtensionFileLoader("_program_confine", path)
    module = loader.create_module(bootstrap.spec_from_loader("_program_confine", loader, origin=path))
    sys.modules.pop("_program_confine", None)
    return module


def _confine(prepared: Prepared) -> None:
    """Install the seccomp filter on this process (with no_new_privs, no capability is needed); raises if not."""
    prepared.native.no_new_privs()
    prepared.native.seccomp_filter(prepared.filter)


def serve(control_fd: int) -> None:
    """The empty interpreter: one forked process per program the supervisor asks for, until it hangs up.

    It never receives a program, only a folder and three pipe ends, so a fork of it holds nothing but the one
    program that process then reads.  Each is forked twice over: its first parent exits at once, so it
    becomes the supervisor's child (the supervisor is a subreaper), which waits for it and kills it."""
    import socket

    prepared = Prepared(os.uname().machine)
    prepared.native.not_dumpable()  # inherited by every fork: no program can reach this process or another's
    control = socket.socket(fileno=control_fd)
    for name in PRELOADED:  # trusted standard modules many programs import: imported once here, not per program
        try:
            __import__(name)
        except ImportError:
            pass
    import gc

    # Everything this interpreter holds now goes to the collector's permanent generation: a collection in a
    # forked process then never walks (and so never copies, page by page) the objects it shares with us.
    gc.freeze()
    while True:
        message, fds, _, _ = socket.recv_fds(control, 4096, 3)
        if not message or len(fds) != 3:
            return
        report_r, report_w = os.pipe()
        middle = os.fork()
        if middle == 0:  # never returns into the loop, whatever happens
            try:
                child = os.fork()
                if child == 0:
                    work, uid = message.decode().split("\n")
                    _child(work, int(uid), fds, (control.fileno(), report_r, report_w), prepared)
                os.write(report_w, str(child).encode())
            finally:
                os._exit(0)
        for fd in (*fds, report_w):
            os.close(fd)
        pid = os.read(report_r, 32)
        os.close(report_r)
        os.waitpid(middle, 0)
        control.send(pid or b"0")


def _child(work: str, uid: int, fds: list[int], drop: tuple[int, ...], prepared: Prepared) -> None:
    """The program's process: its own session, folder and pipes (program, prints, results as fd 3), nothing else."""
    exit_code = 0
    try:
        os.setsid()
        for fd in drop:
            os.close(fd)
        program_r, print_w, result_w = fds
        for fd, target in ((program_r, 0), (print_w, 1), (print_w, 2), (result_w, 3)):
            os.dup2(fd, target)
        os.closerange(4, 1 << 16)
        os.chdir(work)
        os.environ.update(HOME=work, TMPDIR=work)  # tempfile's files land in the folder, not in a refused /tmp
        main(3, uid, prepared)
    except BaseException:  # noqa: BLE001 - the driver's own failure; what it reported stands
        exit_code = 70
    finally:  # no atexit handler, finalizer or non-daemon thread of the program runs after its last test
        os._exit(exit_code)


def main(result_fd: int, uid: int, prepared: Prepared) -> None:
    """Set up (its own uid, read the program, limits, filter), report ``ready``, then run the program."""
    out = os.fdopen(result_fd, "w", buffering=1)
    try:
        _become(uid)  # first: nothing of the program is read while this process could still act as root
        chunks = []
        while chunk := os.read(0, 1 << 16):
            chunks.append(chunk)
        payload = marshal.loads(b"".join(chunks))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        _apply_limits(payload["limits"])
        prepared.native.no_new_privs()  # what landlock_restrict_self asks of an unprivileged process
        files = _landlock(prepared, os.getcwd())
        _confine(prepared)
        # Forget the set-up before any program code runs: it is reachable through the frames above the program
        # (serve's locals), and though the module can only confine further, the program has no use for it
        prepared.__dict__.clear()
        out.write(_dumps({"event": "ready", "files": files, "uid": uid}) + "\n")
    except Exception as exc:  # noqa: BLE001 - no program code has run: the runner's failure, not the program's
        out.write(_dumps({"event": "setup_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}) + "\n")
        return
    drive(payload["program"], out)
    out.flush()


NATIVE_REFUSED = frozenset((
    "ctypes", "_ctypes", "_ctypes_test", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testclinic", "_testimportmultiple", "_testsinglephase", "_xxtestfuzz", "_xxsubinterpreters",
    "_xxinterpchannels", "xxlimited", "xxlimited_35", "_program_confine"))
"""Modules no program may load: ctypes writes any memory and calls any C function with no audit event; CPython's
test modules have entry points made to break its rules; a subinterpreter runs code without this hook (hooks
are per interpreter).  Any of them would switch the hook off; the kernel's layers would still hold."""


def _install_guard(work: str, read_roots: tuple[str, ...], out_fd: int) -> None:
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

    def stop(why, _write=os.write, _exit=os._exit, _dumps=_dumps, _fd=out_fd, _code=VIOLATION_EXIT):
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


def drive(data: dict, out) -> None:
    """In the program's interpreter: compile the program, install the guard, call its entry on each input in turn."""
    out_fd = out.fileno()
    work = os.getcwd()
    read_roots = _read_roots()

    def emit(record: dict) -> None:
        out.write(_dumps(record) + "\n")

    try:
        compiled = compile(data["code"], "<candidate>", "exec")
    except (SyntaxError, ValueError) as exc:
        emit({"event": "syntax_error", "detail": f"{type(exc).__name__}: {exc}"})
        return
    loads, dumps = marshal.loads, _dumps
    inputs = [marshal.dumps(x) for x in data["inputs"]]  # each test gets its own copy, whatever the last one did
    entry, by_keyword = data["entry"], data["call"] == "kwargs"
    del data
    _install_guard(work, read_roots, out_fd)
    namespace = {"__name__": "candidate", "__builtins__": __builtins__}
    try:
        exec(compiled, namespace)
    except BaseException as exc:  # noqa: BLE001 - anything the program raises at load time is its failure
        emit({"event": "load_error", "detail": f"{type(exc).__name__}: {exc}"})
        return
    function = namespace.get(entry)
    if not callable(function):
        emit({"event": "no_function", "detail": f"no function {entry!r} defined"})
        return
    for i, text in enumerate(inputs):
        emit({"event": "start", "i": i})
        args = loads(text)
        try:
            value = function(**args) if by_keyword else function(*args)
            emit({"event": "result", "i": i, "value": dumps(value)})
        except BaseException as exc:  # noqa: BLE001 - SystemExit and MemoryError included: the test errs
            emit({"event": "result", "i": i, "error": f"{type(exc).__name__}: {exc}"[:200]})


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) != 3:
        sys.exit("usage: program_driver.py serve CONTROL_FD")
    serve(int(sys.argv[2]))

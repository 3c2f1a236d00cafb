"""The program's side of the code grader: an empty interpreter that forks one process per candidate program.

``program_runner.py`` (the supervisor) starts it once per batch, as::

    python3 -S -s -B -P /grader/program_driver.py serve CONTROL_FD

Three files in ``/grader`` whose parts end where their jobs do (standard library only, and the confinement
module ``_program_confine`` built from ``program_confine.c``, which makes the system calls a set-up needs):

- ``program_driver`` (this file): the empty interpreter's loop, each program's process from its fork to its
  last test, and what it reports;
- ``program_confinement``: what that process takes away from itself before its program runs (its uid, rlimits,
  a landlock domain, a seccomp filter), and ``Prepared``, what all of that needs, built once;
- ``program_guard``: the audit hook the program then runs under.

The driver imports the other two before anything else and takes ``/grader`` off ``sys.path`` again: no program's
import ever looks there.  They stay plain sibling files (not a package, as the harness runtime is) because the
supervisor hands over single files and a program's process must not find a package folder on its path.

The empty interpreter makes itself non-dumpable (inherited by every fork: no program can reach its memory through
``/proc``), loads what a program's set-up needs, and then only ever receives, per program, a folder, a uid
and three pipe ends; it forks a process there (forked twice over, so that the supervisor, a subreaper, is its
parent).  That process drops to the uid (gid the same, no supplementary groups: every capability it had
is cleared; it refuses to go on if any is left), so the kernel refuses it any signal, trace or ``/proc`` read
of a process of the supervisor's or another program's uid, and its uid's process limit caps its threads
(``program_confinement.MAX_THREADS``).  It then reads its program on fd 4 (``marshal``: code, entry, call
convention, limits; nothing of any other program, no input yet and no expected value), and before the program's
code runs it takes its rlimits and installs

- a **seccomp filter**: creating a process (fork, vfork, clone without ``CLONE_THREAD``, exec), sending any
  signal (kill, tkill, tgkill, sigqueue, pidfd, SIGIO through ``F_SETOWN``), ptrace, cross-process memory,
  changing another process's limits or scheduling, an anonymous memory file (``memfd_create``: its folder's
  ``/tmp`` is ``noexec``, so no file of its own can be mapped executable), and closing its result channel (fd 3)
  or putting another file in its place, kill it with SIGSYS; threads stay allowed;
- a **landlock ruleset** (where the kernel has it: Linux 5.13 and later): the kernel refuses every file
  outside its folder (read and write) and Python's library (read only), whatever code opens it, C included
  (``readline``'s history files raise no audit event); ``ready`` says ``files: landlock`` or ``hook only``;
- an **audit hook** (which cannot be removed) that ends it with ``VIOLATION_EXIT`` on gc object walks, files
  touched outside its folder and Python's own library, and loading ctypes, CPython's test modules, a
  subinterpreter or an extension module from anywhere but Python's library (``NATIVE_REFUSED``).  Its own set-up
  never imports ctypes (``Prepared``), so no program finds a way to write its own memory already loaded.

It reports on its result channel (fd 3), one JSON line per event: ``ready`` (its set-up is done; only now can program
code run) or ``setup_error``; then ``loaded`` (or what ended the program first), and then, for each input the
supervisor sends on fd 4 (one at a time: the next only once it has this one's answer), one ``result``.  The
supervisor frames them itself (``program_watch``): the test an answer belongs to is the one it sent last, the clock
is its own, and any frame beyond those is a violation that voids every test.  So a frame the program writes of its
own counts for nothing it could not have returned, and at best ends it ``forbidden``.

The start of each program is the grader's cost, and in a fork it is mostly pages copied on first write: so the
empty interpreter builds what every set-up needs once (``Prepared``), imports the standard modules programs
often import (``PRELOADED``), and freezes its objects out of the collector's reach before it forks.
"""

from __future__ import annotations

import fcntl
import marshal
import os
import sys


def _import_siblings():
    """``program_confinement`` and ``program_guard`` from this file's folder (``/grader``), which then leaves
    ``sys.path`` and the importer cache: no program's import ever looks there (it may not read it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import program_confinement
        import program_guard
    finally:
        sys.path.remove(here)
        sys.path_importer_cache.pop(here, None)
    return program_confinement, program_guard


confinement, guard = _import_siblings()

RESULT_FD = 3
"""The program's process writes its frames here; ``program_confinement``'s filter refuses closing it or putting another
file in its place, so the driver's own answer always reaches the supervisor."""
INPUT_FD = 4
"""Where the supervisor's messages arrive: the program, then its inputs one at a time (``read_frame``)."""

PRELOADED = ("bisect", "collections", "functools", "heapq", "itertools", "json", "math", "re", "string", "typing")
"""Standard modules the empty interpreter imports before it forks (``typing`` cost each program that imported it
about 9 ms of CPU, ``json`` 7, ``string`` 6; all of them once, about 10 ms per batch).  Only modules with no
state a program could learn anything from: not ``random``, whose seed every fork would share."""


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


def serve(control_fd: int) -> None:
    """The empty interpreter: one forked process per program the supervisor asks for, until it hangs up.

    It never receives a program, only a folder and three pipe ends, so a fork of it holds nothing but the one
    program that process then reads.  Each is forked twice over: its first parent exits at once, so it
    becomes the supervisor's child (the supervisor is a subreaper), which waits for it and kills it."""
    import socket

    prepared = confinement.Prepared(os.uname().machine)
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


def _child(work: str, uid: int, fds: list[int], drop: tuple[int, ...], prepared: confinement.Prepared) -> None:
    """The program's process: its own session, folder and pipes (its inputs on fd 4, prints on 1 and 2, its answers
    on fd 3), nothing else."""
    exit_code = 0
    try:
        os.setsid()
        for fd in drop:
            os.close(fd)
        # above every target first: a received descriptor may hold the number another one is moved to
        program_r, print_w, result_w, null = (fcntl.fcntl(fd, fcntl.F_DUPFD, 16)
                                              for fd in (*fds, os.open(os.devnull, os.O_RDONLY)))
        for fd, target in ((null, 0), (print_w, 1), (print_w, 2), (result_w, RESULT_FD), (program_r, INPUT_FD)):
            os.dup2(fd, target)
        os.closerange(INPUT_FD + 1, 1 << 16)
        os.chdir(work)
        os.environ.update(HOME=work, TMPDIR=work)  # tempfile's files land in the folder, not in a refused /tmp
        main(uid, prepared)
    except BaseException:  # noqa: BLE001 - the driver's own failure; what it reported stands
        exit_code = 70
    finally:  # no atexit handler, finalizer or non-daemon thread of the program runs after its last test
        os._exit(exit_code)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    """One message from the supervisor (4 bytes of length, little-endian, then the bytes); None once it hung up."""
    header = _read_exact(fd, 4)
    return None if header is None else _read_exact(fd, int.from_bytes(header, "little"))


def _line(record: dict) -> bytes:
    return (_dumps(record) + "\n").encode()


def main(uid: int, prepared: confinement.Prepared) -> None:
    """Set up (its own uid, read the program, limits, filter), report ``ready``, then run the program."""
    try:
        confinement.become(uid)  # first: nothing of the program is read while this process could still act as root
        payload = marshal.loads(read_frame(INPUT_FD) or b"")
        confinement.apply_limits(payload["limits"])
        prepared.native.no_new_privs()  # what landlock_restrict_self asks of an unprivileged process
        files = confinement.landlock(prepared, os.getcwd())
        confinement.confine(prepared)
        # Forget the set-up before any program code runs: it is reachable through the frames above the program
        # (serve's locals), and though the module can only confine further, the program has no use for it
        prepared.__dict__.clear()
        os.write(RESULT_FD, _line({"event": "ready", "files": files, "uid": uid}))
    except Exception as exc:  # noqa: BLE001 - no program code has run: the runner's failure, not the program's
        os.write(RESULT_FD, _line({"event": "setup_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}))
        return
    drive(payload["program"], int(payload["max_value_chars"]))


def drive(data: dict, max_value_chars: int) -> None:
    """In the program's interpreter: compile the program, install the guard, then answer each input the supervisor
    sends, one at a time, with one ``result`` frame, until it hangs up.

    The inputs are not here before their turn (the supervisor sends the next only once it has the answer to the
    last), and the supervisor frames the answers itself: it takes exactly one ``result`` per input, carrying that
    input's index, so a frame the program writes of its own on fd 3 is one too many (``program_watch``).  The names
    used below are this frame's locals, bound before any program code runs: locals the program cannot rebind."""
    write, fd, loads, dumps, line, read = os.write, RESULT_FD, marshal.loads, _dumps, _line, read_frame
    work = os.getcwd()
    read_roots = confinement.read_roots()
    try:
        compiled = compile(data["code"], "<candidate>", "exec")
    except (SyntaxError, ValueError) as exc:
        # capped as every other detail: a message can quote the program (a repeated keyword's name), and a frame
        # over the supervisor's line cap would be a channel violation, the program ``forbidden``
        write(fd, line({"event": "syntax_error", "detail": _said(exc)}))
        return
    entry, by_keyword = data["entry"], data["call"] == "kwargs"
    del data
    guard.install_guard(work, read_roots, fd, _dumps)
    namespace = {"__name__": "candidate", "__builtins__": __builtins__}
    try:
        exec(compiled, namespace)
    except BaseException as exc:  # noqa: BLE001 - anything the program raises at load time is its failure
        write(fd, line({"event": "load_error", "detail": _said(exc)}))
        return
    function = namespace.get(entry)
    if not callable(function):
        write(fd, line({"event": "no_function", "detail": f"no function {entry!r} defined"}))
        return
    write(fd, line({"event": "loaded"}))
    i = 0
    while (frame := read(INPUT_FD)) is not None:
        args = loads(frame)  # its own copy, whatever the last test did to its arguments
        try:
            value = function(**args) if by_keyword else function(*args)
            text = dumps(value)
            record = ({"event": "result", "i": i, "value": text} if len(text) <= max_value_chars
                      else {"event": "result", "i": i, "error": "output too large"})
        except BaseException as exc:  # noqa: BLE001 - SystemExit and MemoryError included: the test errs
            record = {"event": "result", "i": i, "error": _said(exc)[:200]}
        write(fd, line(record))
        i += 1


def _said(exc: BaseException) -> str:
    """``Type: message``, or the type alone where the exception's own ``str`` fails (the program wrote it)."""
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except BaseException:  # noqa: BLE001
        return type(exc).__name__[:300]


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) != 3:
        sys.exit("usage: program_driver.py serve CONTROL_FD")
    serve(int(sys.argv[2]))

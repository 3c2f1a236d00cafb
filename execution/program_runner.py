"""Inside a grading container: run many candidate programs, one process each, and report what they returned.

Standard library only.  ``execution.programs`` runs it as the one run of an ``execution.container``
plan, so the shared layer's trusted parent (pid 1) starts it with the record channel's two
descriptors last on its command line::

    python3 -I -S /grader/program_runner.py supervise /grader/batch.json KEY_FD RECORD_FD

The supervisor re-executes itself with ``PYTHONHASHSEED=0`` (programs are graded under the hash
seed their references ran with), makes itself non-dumpable (no candidate can reach its
descriptors, its memory or the channel key) and a child subreaper, then runs the batch's programs
one after another.  Each program runs in a forked child (a fork of the started interpreter is far
cheaper than a new one) that keeps only two pipes (its prints, its results), in its own empty
folder under /tmp, with its own rlimits (address space, CPU, file size, open files).  Before the candidate's code runs, the driver installs
an audit hook (which cannot be removed) that ends the process with ``VIOLATION_EXIT`` on a fork,
a subprocess, a signal sent, ctypes, gc object walks, or a file touched outside the folder and
Python's own library.

The supervisor watches every test with its own deadline, caps what the program prints, kills
every process left after each program (``kill(-1)`` spares only itself and the parent), and
sends one MAC'd ``test`` record per returned value and one ``program`` record per program over
the channel, which no candidate holds.  It never sees an expected output: the host compares.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import shutil
import signal
import sys
import time

VIOLATION_EXIT = 86
MAX_VALUE_CHARS = 1800
"""A returned value's JSON longer than this is not kept (the test is an error: output too large); a record
of the shared channel holds at most 4096 bytes and 2000 characters per field."""
MAX_RECORD_CHARS = 3500
MAX_PRINT_BYTES = 1 << 20
"""What a program may print (stdout + stderr) before it is killed for output."""
MAX_RESULT_BYTES = 256 << 10
"""What a program may write to its result pipe before it is killed for output."""
STDERR_KEPT = 400
WORK_ROOT = "/tmp/programs"


# -- supervisor (trusted, pid 1) -----------------------------------------------------------------

def _harden() -> bool:
    """PR_SET_DUMPABLE 0 (our /proc/<pid>/fd and mem become root's, out of the candidates' reach) and
    PR_SET_CHILD_SUBREAPER 1 (an orphan of a program is ours to kill and reap)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0 and libc.prctl(36, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no ctypes in the image: the host still judges only outputs
        return False


def _limits(limits: dict):
    def apply() -> None:
        memory = int(limits["memory_mb"]) << 20
        cpu = int(limits["cpu_s"])
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _kill_everything_else() -> None:
    """Kill every process we may signal but ourselves and the parent (pid 1), and reap them (we are their subreaper)."""
    for _ in range(50):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.01)


def run_program(program: dict, limits: dict) -> dict:
    """Run one program on its inputs in a forked child; what happened, with the values it returned (never judged).

    A fork of this already-started interpreter, not a fresh one: starting Python costs more than
    most programs take.  The child keeps only its two pipes (what it prints, and its results), so
    the record channel and everything else the supervisor holds is closed before candidate code runs.
    """
    n = len(program["inputs"])
    work = os.path.join(WORK_ROOT, str(program["index"]))
    os.makedirs(work, mode=0o700)
    print_r, print_w = os.pipe()
    result_r, result_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(print_w, 1)
            os.dup2(print_w, 2)
            keep = os.dup2(result_w, 3)
            os.closerange(4, 1 << 16)
            os.chdir(work)
            os.environ.clear()
            os.environ.update({"HOME": work, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            _limits(limits)()
            drive(program, keep)
        except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into the supervisor
            code = 70
        finally:
            os._exit(code)
    os.close(print_w)
    os.close(result_w)
    outcome = _watch(pid, print_r, result_r, n, limits, started)
    _kill_everything_else()
    shutil.rmtree(work, ignore_errors=True)
    outcome["index"] = program["index"]
    outcome["duration_s"] = round(time.monotonic() - started, 3)
    return outcome


def _reap(pid: int, until: float) -> int | None:
    """The child's exit code (negative: killed by that signal) once it ended before ``until``, else None."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= until:
            return None
        time.sleep(0.005)


def _watch(pid: int, print_fd: int, result_fd: int, n: int, limits: dict, started: float) -> dict:
    per_test, startup = float(limits["per_test_s"]), float(limits["startup_s"])
    tests: list[dict | None] = [None] * n
    event: dict | None = None
    current, deadline = -1, started + startup
    end_of_life = started + startup + per_test * max(n, 1)
    printed, result_bytes, stderr_head = 0, 0, b""
    killed_for = None
    buffer = b""
    sel = selectors.DefaultSelector()
    sel.register(print_fd, selectors.EVENT_READ, "out")
    sel.register(result_fd, selectors.EVENT_READ, "res")
    while sel.get_map():
        now = time.monotonic()
        if now > min(deadline, end_of_life):
            killed_for = "timeout"
            break
        for key, _ in sel.select(timeout=min(deadline, end_of_life) - now):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                continue
            if key.data == "out":
                printed += len(chunk)
                if len(stderr_head) < STDERR_KEPT:
                    stderr_head += chunk[:STDERR_KEPT - len(stderr_head)]
                continue
            result_bytes += len(chunk)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                record = _record(line)
                kind = record.get("event")
                if kind == "start" and record.get("i") == current + 1 and current + 1 < n:
                    current, deadline = current + 1, time.monotonic() + per_test
                elif kind == "result" and record.get("i") == current and tests[current] is None:
                    tests[current] = {"value": record.get("value"), "error": record.get("error")}
                    deadline = time.monotonic() + per_test
                elif kind in ("syntax_error", "load_error", "no_function", "violation") and event is None:
                    event = {"kind": kind, "detail": str(record.get("detail", ""))[:300]}
            if len(buffer) > MAX_VALUE_CHARS * 2 and current >= 0 and tests[current] is None:
                tests[current] = {"value": None, "error": "output too large"}
                buffer = b""
        if printed > MAX_PRINT_BYTES or result_bytes > MAX_RESULT_BYTES:
            killed_for = "output_limit"
            break
    exit_code = None
    if not killed_for:  # it closed its pipes; it may still be alive (sleeping), so its wait has the same deadline
        exit_code = _reap(pid, min(deadline, end_of_life))
        killed_for = None if exit_code is not None else "timeout"
    if killed_for:
        _kill_group(pid)
        exit_code = _reap(pid, time.monotonic() + 5.0)
    sel.close()
    os.close(print_fd)
    os.close(result_fd)
    return {"exit": exit_code, "killed_for": killed_for, "current": current, "event": event,
            "tests": tests, "printed": printed,
            "stderr": stderr_head.decode("utf-8", "replace")}


def _record(line: bytes) -> dict:
    if len(line) > MAX_VALUE_CHARS * 2:
        return {"event": "result", "i": None}
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _report(send, outcome: dict) -> None:
    """One ``test`` record per returned value or error, then the ``program`` record, each within the channel's caps."""
    index = outcome["index"]
    for i, test in enumerate(outcome.get("tests") or []):
        if test is None:
            continue
        value, error = test.get("value"), test.get("error")
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            value, error = None, "output too large"
        record = {"p": index, "i": i, "value": value if isinstance(value, str) else None,
                  "error": None if error is None else str(error)[:200]}
        if len(json.dumps(record)) > MAX_RECORD_CHARS:
            record.update(value=None, error="output too large")
        send("test", **record)
    if "runner_error" in outcome:
        send("program", p=index, runner_error=outcome["runner_error"])
        return
    event = outcome.get("event") or {}
    send("program", p=index, exit=outcome["exit"], killed_for=outcome["killed_for"], current=outcome["current"],
         event=event.get("kind"), detail=str(event.get("detail") or "")[:300],
         stderr=str(outcome.get("stderr") or "")[:300], duration_s=outcome.get("duration_s"))


def supervise(batch_path: str, key_fd: int, record_fd: int) -> None:
    """Run every program of the batch file in order, reporting over the shared layer's record channel."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from grader_channel import open_channel

    send = open_channel(key_fd, record_fd)
    send("runner", hardened=_harden())
    with open(batch_path, "rb") as f:
        batch = json.load(f)
    os.makedirs(WORK_ROOT, mode=0o711, exist_ok=True)
    for program in batch["programs"]:
        try:
            outcome = run_program(program, batch["limits"])
        except Exception as exc:  # noqa: BLE001 - a runner failure is recorded for this program, never the batch
            _kill_everything_else()
            outcome = {"index": program["index"], "runner_error": f"{type(exc).__name__}: {exc}"[:300]}
        _report(send, outcome)
    send("done")


# -- driver (runs the candidate; everything after the audit hook is untrusted) -------------------

def _install_guard(work: str, read_roots: tuple[str, ...], out_fd: int) -> None:
    """An audit hook that ends the process on anything outside the program's folder and Python's library.

    Every name it uses is bound now, as a default argument, so a candidate that rebinds
    builtins or ``os`` functions cannot change what the hook does.
    """
    blocked = ("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
               "os.kill", "os.killpg", "signal.pthread_kill", "socket.", "ctypes.", "gc.get_objects",
               "gc.get_referrers", "gc.get_referents", "sys.setprofile", "sys.settrace", "os.setuid",
               "resource.setrlimit", "os.symlink", "os.link", "os.chdir", "os.chroot", "sys.remote_exec")
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

    def stop(why, _write=os.write, _exit=os._exit, _dumps=json.dumps, _fd=out_fd, _code=VIOLATION_EXIT):
        try:
            _write(_fd, (_dumps({"event": "violation", "detail": why[:300]}) + "\n").encode())
        finally:
            _exit(_code)

    def hook(event, args, _blocked=blocked, _paths=path_events, _normal=normal, _inside=inside, _stop=stop,
             _work=(work,), _read=read_roots, _isinstance=isinstance, _int=int, _str=str, _wf=write_flags):
        if event.startswith(_blocked):
            _stop(f"{event} is not allowed")
        if event not in _paths or not args:
            return
        target = args[0]
        if _isinstance(target, _int) or target is None:
            return
        path = _normal(target)
        writing = event != "open" and event not in ("os.listdir", "os.scandir", "os.walk", "glob.glob")
        if event == "open":
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 else 0
            writing = (_isinstance(mode, _str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _wf)
        if _inside(path, _work) or (not writing and _inside(path, _read)):
            return
        _stop(f"{event} {'writes' if writing else 'reads'} {path[:200]} outside the program's folder")

    sys.addaudithook(hook)


def drive(data: dict, out_fd: int) -> None:
    """In the forked child: compile the program, install the guard, call its entry point on each input in turn."""
    out = os.fdopen(out_fd, "w", buffering=1)
    work = os.getcwd()
    read_roots = tuple(sorted({p for p in sys.path if p.startswith("/usr") or p.startswith("/opt")}
                              | {"/usr/lib/python3.11", "/usr/share/zoneinfo", "/dev/null", "/dev/urandom"}))

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")

    try:
        compiled = compile(data["code"], "<candidate>", "exec")
    except (SyntaxError, ValueError) as exc:
        emit({"event": "syntax_error", "detail": f"{type(exc).__name__}: {exc}"})
        return
    loads, dumps = json.loads, json.dumps
    inputs = [dumps(x) for x in data["inputs"]]
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
            emit({"event": "result", "i": i, "value": dumps(value, allow_nan=False)})
        except BaseException as exc:  # noqa: BLE001 - SystemExit and MemoryError included: the test errs
            emit({"event": "result", "i": i, "error": f"{type(exc).__name__}: {exc}"[:200]})


if __name__ == "__main__":
    if sys.argv[1:2] != ["supervise"]:
        sys.exit("usage: program_runner.py supervise BATCH.json KEY_FD RECORD_FD")
    if os.environ.get("PYTHONHASHSEED") != "0":  # programs are forks of this interpreter: fix its hash seed first
        # not -I (it implies -E, which ignores PYTHONHASHSEED): a clean environment instead, and no site
        os.execve(sys.executable, [sys.executable, "-S", "-s", "-B", *sys.argv],
                  {"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    supervise(sys.argv[2], int(sys.argv[-2]), int(sys.argv[-1]))

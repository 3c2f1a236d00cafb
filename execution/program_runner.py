"""Inside a grading container: run many candidate programs, one process each, and stream their outputs.

Standard library only; mounted read-only and started as the container's pid 1 by
``execution.programs``::

    python3 -I /grader/program_runner.py supervise /in/batch.json

The supervisor (pid 1, made non-dumpable so no candidate can reach its file descriptors or
memory) runs the batch's programs one after another.  Each program gets a fresh process
(``drive`` mode of this file) in its own empty folder under /tmp, with its own rlimits (address
space, CPU, file size, open files), its program and test *inputs* on stdin, and a private pipe
for results.  Before the candidate's code runs, the driver installs an audit hook (which cannot
be removed) that ends the process with ``VIOLATION_EXIT`` on a fork, a subprocess, a signal
sent, ctypes, gc object walks, or a file touched outside the folder and Python's own library.

The supervisor watches every test with its own deadline, caps what the program prints, kills
every process left in the container after each program (``kill(-1)`` from pid 1 spares only
itself), and prints one bounded JSON line per program on its own stdout, which no candidate
holds.  It never sees an expected output: the host compares the returned values.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import time

VIOLATION_EXIT = 86
MAX_VALUE_CHARS = 4000
"""A returned value's JSON longer than this is not kept (the test is an error: output too large)."""
MAX_LINE_BYTES = 30_000
"""One program's line on stdout; the host caps a batch so that all lines fit its log tail."""
MAX_PRINT_BYTES = 1 << 20
"""What a program may print (stdout + stderr) before it is killed for output."""
MAX_RESULT_BYTES = 256 << 10
"""What a program may write to its result pipe before it is killed for output."""
STDERR_KEPT = 400
WORK_ROOT = "/tmp/programs"


# -- supervisor (trusted, pid 1) -----------------------------------------------------------------

def _non_dumpable() -> bool:
    """PR_SET_DUMPABLE 0: /proc/1/fd and /proc/1/mem become root's, out of the candidates' reach."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0
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
    """Kill every other process in the container and reap them (we are pid 1: orphans are ours)."""
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
    """Run one program on its inputs; what happened, with the values it returned (never judged here)."""
    n = len(program["inputs"])
    work = os.path.join(WORK_ROOT, str(program["index"]))
    os.makedirs(work, mode=0o700)
    read_fd, write_fd = os.pipe()
    env = {"PATH": "/usr/bin:/bin", "HOME": work, "PYTHONHASHSEED": "0", "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": ""}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__), "drive", str(write_fd)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(write_fd,), cwd=work,
        env=env, preexec_fn=_limits(limits), start_new_session=True)
    os.close(write_fd)
    payload = json.dumps({k: program[k] for k in ("code", "entry", "call", "inputs")}).encode()
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except OSError:
        pass  # the process died before reading: its exit says why
    outcome = _watch(proc, read_fd, n, limits, started)
    _kill_everything_else()
    shutil.rmtree(work, ignore_errors=True)
    outcome["index"] = program["index"]
    outcome["duration_s"] = round(time.monotonic() - started, 3)
    return outcome


def _watch(proc: subprocess.Popen, read_fd: int, n: int, limits: dict, started: float) -> dict:
    per_test, startup = float(limits["per_test_s"]), float(limits["startup_s"])
    tests: list[dict | None] = [None] * n
    event: dict | None = None
    current, deadline = -1, started + startup
    end_of_life = started + startup + per_test * max(n, 1)
    printed, result_bytes, stderr_head = 0, 0, b""
    killed_for = None
    buffer = b""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    result_file = os.fdopen(read_fd, "rb", buffering=0)
    sel.register(result_file, selectors.EVENT_READ, "res")
    while sel.get_map():
        now = time.monotonic()
        if now > min(deadline, end_of_life):
            killed_for = "timeout"
            break
        for key, _ in sel.select(timeout=min(deadline, end_of_life) - now):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if key.data in ("out", "err"):
                printed += len(chunk)
                if key.data == "err" and len(stderr_head) < STDERR_KEPT:
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
    if not killed_for:
        try:  # it closed its pipes; it may still be alive (sleeping), so its wait has the same deadline
            proc.wait(timeout=max(0.0, min(deadline, end_of_life) - time.monotonic()))
        except subprocess.TimeoutExpired:
            killed_for = "timeout"
    if killed_for:
        _kill_group(proc)
    exit_code = proc.wait()
    for stream in (proc.stdout, proc.stderr, result_file):
        stream.close()
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


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _line(outcome: dict) -> str:
    """One bounded JSON line: values past ``MAX_VALUE_CHARS`` are dropped (the test errs)."""
    for test in outcome["tests"]:
        if test and isinstance(test.get("value"), str) and len(test["value"]) > MAX_VALUE_CHARS:
            test["value"], test["error"] = None, "output too large"
        if test and test.get("error") is not None:
            test["error"] = str(test["error"])[:200]
    line = json.dumps(outcome)
    if len(line.encode()) > MAX_LINE_BYTES:
        outcome["tests"] = [None if t is None else {"value": None, "error": "output too large"}
                            for t in outcome["tests"]]
        outcome["stderr"] = ""
        line = json.dumps(outcome)
    return line


def supervise(batch_path: str) -> None:
    """Run every program of the batch file in order; one result line each on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # pid 1 with default handlers: signals from inside are ignored
    dumpable_off = _non_dumpable()
    with open(batch_path, "rb") as f:
        batch = json.load(f)
    os.makedirs(WORK_ROOT, mode=0o711, exist_ok=True)
    print(json.dumps({"runner": "ready", "non_dumpable": dumpable_off}), flush=True)
    for program in batch["programs"]:
        try:
            outcome = run_program(program, batch["limits"])
        except Exception as exc:  # noqa: BLE001 - a runner failure is recorded for this program, never the batch
            _kill_everything_else()
            outcome = {"index": program["index"], "runner_error": f"{type(exc).__name__}: {exc}"[:300]}
        sys.stdout.write(_line(outcome) + "\n")
        sys.stdout.flush()


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


def drive(out_fd: int) -> None:
    """Read the program and inputs from stdin, then call its entry point on each input in turn."""
    data = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
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
    if sys.argv[1:2] == ["supervise"]:
        supervise(sys.argv[2])
    elif sys.argv[1:2] == ["drive"]:
        drive(int(sys.argv[2]))
    else:
        sys.exit("usage: program_runner.py supervise BATCH.json | drive FD")

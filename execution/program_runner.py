"""Inside a grading container: run many candidate programs, each in a fresh interpreter, and report what they returned.

Standard library only.  ``execution.programs`` runs it as the one run of an ``execution.container``
plan, so the shared layer's trusted parent (pid 1) starts it with the record channel's two
descriptors last on its command line::

    python3 -I -S /grader/program_runner.py supervise /grader/batch.json KEY_FD RECORD_FD

The supervisor makes itself non-dumpable (no candidate can reach its descriptors, its memory or
the channel key) and a child subreaper, then runs the batch's programs one after another.  Each
program runs in its own process of a **freshly started interpreter that never holds the batch**:
an *empty interpreter* (``program_driver.py serve``, which also says what a program may not do: a
seccomp filter and an audit hook) is started once per batch and is never sent a program, only a
folder and three pipe ends; for each program it forks a process that reads that one program from
its pipe.  So no frame, object or page of a program's process holds another program (a fork of
the supervisor would hold them all), and a fork costs a millisecond where a new interpreter costs
tens; the next program's process is forked while the current one runs (it waits, empty).  Each
program runs in its own folder, made here under a 128-bit random name (no program can take, fill
or find the next one's), and keeps only two pipes (its prints, its results).

The supervisor watches every test with its own deadline, caps what the program prints, kills
every process left after each program but the empty interpreter, removes the folder whatever the
program did to its modes, and sends one MAC'd ``test`` record per returned value and one
``program`` record per program over the channel, which no candidate holds.  A program whose run
failed for the runner's reasons (its folder, its pipes, a process that could not be forked or set
up) is reported with ``runner_error``: the host grades it again.  It never sees an expected
output: the host compares.

Each program runs as **a user of its own**: the container starts this supervisor as uid 0 with only
the capabilities it needs to hand out uids and folders, kill and clean up (``sandboxes.docker.SUPERVISOR_CAPS``,
``supervised=True``); each program's process drops to a fresh uid (``FIRST_PROGRAM_UID`` + its place in the
batch, no supplementary groups) before it reads its program, which clears every capability.  So the kernel
itself refuses a program that signals, traces, re-limits or reads the ``/proc`` of the supervisor, the empty
interpreter or another program (the seccomp filter and landlock refuse the same calls one by one: two
layers), and its uid's process limit caps its threads.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its sibling in /grader (python3 -I adds none)
from program_watch import MAX_VALUE_CHARS, frame, kill_group, report, watch  # noqa: E402

WORK_ROOT = "/tmp/programs"
FIRST_PROGRAM_UID = 20000
"""Program k of a batch runs as uid/gid FIRST_PROGRAM_UID + k: no user of the image, never 0 or 65534."""
SERVER_REPLY_S = 10.0
"""How long the empty interpreter may take to fork a program's process before it counts as failed."""
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "program_driver.py")


def _harden() -> bool:
    """PR_SET_DUMPABLE 0 (our /proc/<pid>/fd and mem become root's, out of the candidates' reach) and
    PR_SET_CHILD_SUBREAPER 1 (an orphan of a program is ours to kill and reap)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0 and libc.prctl(36, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no ctypes in the image: the host still judges only outputs
        return False


@dataclass
class Server:
    """The empty interpreter (``program_driver.py serve``) and our end of its control socket."""

    process: subprocess.Popen
    control: socket.socket


def start_server() -> Server:
    """Start a fresh interpreter that will fork one process per program; it never holds a program itself."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = subprocess.Popen(
            [sys.executable, "-S", "-s", "-B", "-P", DRIVER, "serve", str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), cwd=WORK_ROOT,
            start_new_session=True,
            env={"HOME": WORK_ROOT, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"})
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.settimeout(SERVER_REPLY_S)
    return Server(process, ours)


def stop_server(server: Server) -> None:
    server.control.close()
    kill_group(server.process.pid)
    try:
        os.waitpid(server.process.pid, 0)
    except ChildProcessError:
        pass
    server.process.returncode = -1  # reaped here: Popen must never wait on a pid that may be reused


@dataclass
class Started:
    """A program's process, waiting for its program, with its folder and our ends of its three pipes."""

    pid: int
    work: str
    program_w: int
    print_r: int
    result_r: int


def start_program(server: Server, uid: int) -> Started:
    """A new process forked by ``server`` in a new folder, to run as ``uid`` (the folder's owner); it holds
    nothing until ``run_program`` writes to it."""
    # unguessable (128 bits from the kernel's CSPRNG, what secrets.token_hex reads, without importing secrets and
    # random): no program can take or fill it first
    work = os.path.join(WORK_ROOT, os.urandom(16).hex())
    os.mkdir(work, 0o700)
    os.chown(work, uid, uid)  # the program's own; its parent (0o711, ours) it may only pass through
    ours: list[int] = []  # program_w, print_r, result_r
    theirs: list[int] = []  # program_r, print_w, result_w
    try:
        for we_write in (True, False, False):
            r, w = os.pipe()
            ours.append(w if we_write else r)
            theirs.append(r if we_write else w)
        socket.send_fds(server.control, [f"{work}\n{uid}".encode()], theirs)
        for fd in theirs:
            os.close(fd)
        theirs = []
        pid = int(server.control.recv(32) or b"0")
        if pid <= 0:
            raise OSError("the empty interpreter could not fork a program's process")
    except BaseException:
        for fd in ours + theirs:
            os.close(fd)
        _remove(work)
        raise
    return Started(pid, work, *ours)


def discard(started: Started) -> None:
    """Kill a program's process (and its session), reap it, close our pipe ends, remove its folder."""
    kill_group(started.pid)
    try:
        os.waitpid(started.pid, 0)
    except ChildProcessError:  # already reaped by _watch
        pass
    for fd in (started.program_w, started.print_r, started.result_r):
        try:
            if fd >= 0:
                os.close(fd)
        except OSError:
            pass
    _remove(started.work)


def _kill_all_but(spare: set[int]) -> None:
    """Kill every process but ourselves, the parent (pid 1) and ``spare``, and reap them (we are their subreaper).

    Programs cannot start processes (the driver's filter); this is the safety net if one ever did."""
    keep = spare | {os.getpid(), 1}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


class LeftBehind(OSError):
    """A program left files in its folder that even ``rm -rf`` could not remove: the program's doing."""


def _remove(work: str) -> None:
    """Remove a program's folder whatever it left: the supervisor keeps DAC_OVERRIDE and FOWNER (every mode is
    ours to pass and to change back).  A tree deeper than Python's recursion (os.walk and rmtree recurse) goes to
    ``chmod -R`` and ``rm -rf``, which do not; what still stays is the program's doing (``LeftBehind``), so
    it cannot earn itself a second run as a runner failure."""
    try:
        for root, dirs, _ in os.walk(work):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
        shutil.rmtree(work)
        return
    except (OSError, RecursionError):
        pass
    for argv in (["/bin/chmod", "-R", "u+rwx", work], ["/bin/rm", "-rf", work]):
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60, check=False)
    if os.path.lexists(work):
        raise LeftBehind(f"the program left files in {work} that could not be removed")


def run_program(program: dict, limits: dict, started_process: Started, after=lambda: None) -> dict:
    """Run one program on its inputs in its waiting process; what happened, with the values it returned (never
    judged).  ``after`` runs once the program is handed over.  Raises when the runner itself fails.

    The process gets its program first and then its inputs one at a time, each once the last one's answer is in
    (``program_watch.watch``): no input is in its memory before its turn."""
    started = time.monotonic()
    inputs = [frame(marshal.dumps(args)) for args in program["inputs"]]
    code = {key: program[key] for key in ("code", "entry", "call")}
    data = memoryview(frame(marshal.dumps({"program": code, "limits": limits, "max_value_chars": MAX_VALUE_CHARS})))
    try:
        while data:  # the process reads it whole before anything else (its driver: no program code runs yet)
            data = data[os.write(started_process.program_w, data):]
    except BaseException:
        os.close(started_process.program_w)
        started_process.program_w = -1
        raise
    after()
    program_w, started_process.program_w = started_process.program_w, -1  # the watch closes it, whatever happens
    outcome = watch(started_process.pid, started_process.print_r, started_process.result_r, program_w, inputs,
                    limits, started)
    if not outcome.pop("ready"):  # the driver failed (or never started) before the program ran: not the program's
        why = ((outcome.get("event") or {}).get("detail")
               or f"exit {outcome['exit']}, killed for {outcome['killed_for']}")
        return {"index": program["index"], "runner_error": f"the program's process did not set up: {why}"[:300]}
    outcome["index"] = program["index"]
    outcome["duration_s"] = round(time.monotonic() - started, 3)
    return outcome


def supervise(batch_path: str, key_fd: int, record_fd: int) -> None:
    """Run every program of the batch file in order, reporting over the shared layer's record channel."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from grader_channel import open_channel

    send = open_channel(key_fd, record_fd)
    os.set_inheritable(record_fd, False)  # belt and braces: Popen closes it in the empty interpreter anyway
    send("runner", hardened=_harden())
    with open(batch_path, "rb") as f:
        batch = json.load(f)
    os.makedirs(WORK_ROOT, mode=0o711, exist_ok=True)
    server: Server | None = None
    following: Started | None = None
    programs = batch["programs"]
    uids = iter(range(FIRST_PROGRAM_UID, FIRST_PROGRAM_UID + 10 * len(programs) + 10))  # never one uid twice
    for k, program in enumerate(programs):
        process, following = following, None

        def fork_the_next(k: int = k) -> None:
            """While this program runs, the next one's process is forked (it waits, empty, for its program)."""
            nonlocal following
            if k + 1 < len(programs) and server is not None:
                try:
                    following = start_program(server, next(uids))
                except Exception:  # noqa: BLE001 - the next program forks its own and reports a failure there
                    following = None

        try:
            server = server or start_server()
            process = process or start_program(server, next(uids))
            outcome = run_program(program, batch["limits"], process, fork_the_next)
        except Exception as exc:  # noqa: BLE001 - a runner failure is recorded for this program, never the batch
            outcome = {"index": program["index"], "runner_error": f"{type(exc).__name__}: {exc}"[:300]}
            if process is None and server is not None:  # the empty interpreter failed: the next program gets a new one
                stop_server(server)
                server = None
        finally:
            try:
                if process is not None:
                    discard(process)
            except LeftBehind as exc:  # the program's doing: its own failure, never a second run
                if "runner_error" not in outcome:
                    outcome["event"] = {"kind": "violation", "detail": str(exc)[:300]}
            except Exception as exc:  # noqa: BLE001 - the runner could not clean up: this grade is not trusted
                outcome = {"index": program["index"], "runner_error": f"{type(exc).__name__}: {exc}"[:300]}
            _kill_all_but({started.pid for started in (following,) if started}
                          | ({server.process.pid} if server else set()))
        report(send, outcome)
    if following is not None:
        discard(following)
    if server is not None:
        stop_server(server)
    send("done", cpu_us=_container_cpu_us())


def _container_cpu_us() -> int | None:
    """CPU microseconds the whole container used so far (its cgroup's count: every process, ended ones too; the
    channel carries integers, not floats), for the bench's CPU per program; None where no cgroup is mounted."""
    for path, per_us in (("/sys/fs/cgroup/cpuacct/cpuacct.usage", 1000), ("/sys/fs/cgroup/cpu.stat", 1)):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        if path.endswith("cpu.stat"):
            text = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), "")
        if text.strip().isdigit():
            return int(text.strip()) // per_us
    return None


if __name__ == "__main__":
    if sys.argv[1:2] != ["supervise"] or len(sys.argv) != 5:
        sys.exit("usage: program_runner.py supervise BATCH.json KEY_FD RECORD_FD")
    supervise(sys.argv[2], int(sys.argv[-2]), int(sys.argv[-1]))
    os._exit(0)  # ``done`` is sent and every process is reaped: the interpreter's shutdown would only cost time

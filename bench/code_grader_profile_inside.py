"""Inside a supervised grading container: where one program's time goes (``bench/profile_code_grader.py`` runs it).

Standard library only; runs as the code grader's supervisor does (uid 0 with ``SUPERVISOR_CAPS``) beside the real
``program_runner.py``, ``program_watch.py`` and ``program_driver.py`` in ``/grader``, and prints one JSON line.
Each figure is a mean per program (or per start) in milliseconds: ``wall`` and ``cpu`` (CPU seconds of every
process involved, so a loaded machine inflates wall but hardly cpu).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, "/grader")
import program_driver  # noqa: E402
import program_runner  # noqa: E402
import program_watch  # noqa: E402


def cpu_all() -> float:
    """CPU seconds of this process and of every child it reaped."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it reaped (``/proc/<pid>/stat`` fields 14-17)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def starts(repeat: int) -> dict:
    """Interpreter start, by flags and by what it imports (each a fresh process, waited for)."""
    cases = {
        "python -S -s -B -P (the empty interpreter's flags)": ["-S", "-s", "-B", "-P", "-c", "pass"],
        "python -I -S": ["-I", "-S", "-c", "pass"],
        "python -I (site imported)": ["-I", "-c", "pass"],
        "the empty interpreter's imports": ["-S", "-s", "-B", "-P", "-c",
                                            "import socket, resource, struct, marshal"],
        "the supervisor's imports": ["-I", "-S", "-c", "import json, marshal, secrets, shutil, signal, socket, "
                                     "subprocess, ctypes, selectors, hashlib"],
    }
    out = {}
    for name, flags in cases.items():
        wall, cpu = time.monotonic(), cpu_all()
        for _ in range(repeat):
            subprocess.run([sys.executable, *flags], check=True)
        out[name] = {"wall_ms": (time.monotonic() - wall) / repeat * 1e3, "cpu_ms": (cpu_all() - cpu) / repeat * 1e3}
    return out


def set_up_steps(program: dict, repeat: int) -> dict:
    """The program's process's own set-up, step by step, in a fork of this (root, capable) process as the empty
    interpreter's fork is: its CPU (process_time) and wall per step."""
    prepared = program_driver.confinement.Prepared(os.uname().machine)
    roots = program_driver.confinement.read_roots()
    totals: dict[str, list[float]] = {}
    for k in range(repeat):
        uid = 30000 + k
        work = f"/tmp/programs/profile-{k}"
        os.mkdir(work, 0o700)
        os.chown(work, uid, uid)
        r, w = os.pipe()
        forked_at = time.monotonic()
        pid = os.fork()
        if pid == 0:
            marks = [("fork", time.monotonic() - forked_at, 0.0)]
            try:
                clock, cpu = time.monotonic(), time.process_time()

                def mark(step: str) -> None:
                    nonlocal clock, cpu
                    now, used = time.monotonic(), time.process_time()
                    marks.append((step, now - clock, used - cpu))
                    clock, cpu = now, used

                os.setsid()
                os.chdir(work)
                mark("setsid, chdir")
                program_driver.confinement.become(uid)
                mark("drop to its uid (+ /proc/self/status check)")
                program_driver.confinement.apply_limits(program["limits"])
                mark("rlimits")
                prepared.native.no_new_privs()
                landlock = program_driver.confinement.landlock(prepared, work)
                mark(f"landlock ({landlock})")
                program_driver.confinement.confine(prepared)
                mark("seccomp filter")
                compiled = compile(program["code"], "<candidate>", "exec")
                mark("compile the program")
                program_driver.guard.install_guard(work, roots, w, program_driver._dumps)
                mark("audit hook")
                namespace = {"__name__": "candidate"}
                exec(compiled, namespace)
                mark("load the program (exec)")
                function = namespace[program["entry"]]
                for args in program["inputs"]:
                    program_driver._dumps(function(**args))
                mark(f"run its {len(program['inputs'])} tests + encode")
            finally:
                os.write(w, json.dumps(marks).encode())
                os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        program_runner._remove(work)
        for step, wall, cpu in json.loads(data):
            totals.setdefault(step, [0.0, 0.0])
            totals[step][0] += wall
            totals[step][1] += cpu
    return {step: {"wall_ms": wall / repeat * 1e3, "cpu_ms": cpu / repeat * 1e3}
            for step, (wall, cpu) in totals.items()}


def supervisor_steps(program: dict, repeat: int) -> dict:
    """The supervisor's side, with the real empty interpreter: fork a program's process (folder, pipes, the
    control socket's round trip), run it (watch its pipes, reap it), discard it, sweep /proc; and how often the
    reap found the process not yet ended and slept."""
    sleeps = [0, 0.0]
    real_sleep = time.sleep

    def counted(seconds: float) -> None:
        sleeps[0] += 1
        started = time.monotonic()
        real_sleep(seconds)
        sleeps[1] += time.monotonic() - started

    program_watch.time.sleep = counted  # the profile's own process only
    server = program_runner.start_server()
    steps = {"start_program (folder, pipes, fork by the empty interpreter)": [0.0, 0.0],
             "run_program (hand over, watch, reap)": [0.0, 0.0], "discard (kill, close, remove the folder)": [0.0, 0.0],
             "sweep /proc (_kill_all_but)": [0.0, 0.0]}
    names = list(steps)
    uids = iter(range(program_runner.FIRST_PROGRAM_UID, program_runner.FIRST_PROGRAM_UID + repeat + 1))
    statuses = []
    begin_wall, begin_cpu, begin_server = time.monotonic(), cpu_all(), process_cpu(server.process.pid)
    for _ in range(repeat):
        clock, cpu = time.monotonic(), cpu_all()

        def mark(step: str) -> None:
            nonlocal clock, cpu
            now, used = time.monotonic(), cpu_all()
            steps[step][0] += now - clock
            steps[step][1] += used - cpu
            clock, cpu = now, used

        started = program_runner.start_program(server, next(uids))
        mark(names[0])
        outcome = program_runner.run_program({"index": 0, **program}, program["limits"], started)
        statuses.append(outcome.get("exit"))
        mark(names[1])
        program_runner.discard(started)
        mark(names[2])
        program_runner._kill_all_but({server.process.pid})
        mark(names[3])
    total_wall, total_cpu = time.monotonic() - begin_wall, cpu_all() - begin_cpu
    server_cpu = process_cpu(server.process.pid) - begin_server
    program_runner.stop_server(server)
    result = {step: {"wall_ms": wall / repeat * 1e3, "cpu_ms": cpu / repeat * 1e3}
              for step, (wall, cpu) in steps.items()}
    result["whole program, supervisor's view"] = {"wall_ms": total_wall / repeat * 1e3,
                                                 "cpu_ms": total_cpu / repeat * 1e3}
    result["the empty interpreter's forks (its CPU, clock ticks)"] = {"cpu_ms": server_cpu / repeat * 1e3}
    result["whole program, every process"] = {"cpu_ms": (total_cpu + server_cpu) / repeat * 1e3}
    result["reap sleeps per program"] = {"count": sleeps[0] / repeat, "wall_ms": sleeps[1] / repeat * 1e3}
    result["exit codes"] = sorted(set(map(str, statuses)))
    return result


def main() -> None:
    with open("/grader/profile.json") as f:
        config = json.load(f)
    program_runner._harden()  # a child subreaper, as the supervisor: the programs' processes are reparented here
    os.makedirs(program_runner.WORK_ROOT, mode=0o711, exist_ok=True)
    os.chdir(program_runner.WORK_ROOT)
    program = config["program"]
    report = {"starts": starts(config["starts"]), "set_up": set_up_steps(program, config["repeat"]),
              "supervisor": supervisor_steps(program, config["repeat"])}
    print("PROFILE " + json.dumps(report), flush=True)


main()  # only ever run as a script, in the container (no main guard: it is not one of the bench's programs)

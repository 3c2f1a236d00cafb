"""Grade candidate programs by execution: many per container, judged on the host against hidden outputs.

    jobs = [ProgramJob("p1", code, entry="main_solution", call="kwargs", inputs=[{"x": 1}, {"x": 2}])]
    results = grade_programs(jobs, {"p1": [2, 3]}, sandbox=DockerSandbox())
    results["p1"].status, results["p1"].tests, results["p1"].verified      # "failed", ["passed", "failed"], 0

How a program is judged:

1. A batch of programs (their code and test *inputs* only) goes into one container of the shared
   execution layer (``execution.container.run_plan``: no network, the supervisor uid 0 with six capabilities and
   each program a uid of its own, CPU/memory/pids/time caps, a non-dumpable trusted parent), where
   ``execution/program_runner.py`` runs each program in
   a freshly started interpreter that holds no other program, in its own unguessable folder, with
   its own rlimits, a seccomp filter (no process, no exec, no signal), an audit hook and per-test
   timeouts (see that file), and reports the returned values as MAC'd records that the parent
   streams to the host.
2. The host takes the records the layer parsed (strict, bounded) and compares each returned value
   (itself parsed as strict JSON) with the expected one (``same_value``: floats within 1e-6
   relative, integers, strings and booleans exact; JSON, so no object can compare equal to
   anything).  The expected values never enter the container.
3. Per test: ``passed``, ``failed`` (wrong value), ``error`` (raised, not serialisable, not run)
   or ``timeout``.  ``verified`` is 1 only when every test passed.  The program's ``status`` names
   what ended it first: ``syntax_error``, ``no_function``, ``load_error``, ``forbidden`` (the
   seccomp filter stopped a process, an exec or a signal; the audit hook ctypes, a gc walk or a
   file touched outside its folder), ``output_limit``, ``memory_limit``, ``timeout``, ``exited`` (ended before its last
   test), ``crashed`` (killed by a signal), else ``passed``, ``failed`` (a wrong value) or ``error`` (no wrong
   value, but a test raised or returned something that is not JSON).
4. A container that dies mid-batch (engine trouble, or a program that brought it down), and a
   program whose run failed for the runner's own reasons (``runner_error``), are graded once more,
   one program per container; a program that still has no record is ``error`` alone.  Containers
   are always removed (``sandboxes.docker``).
"""

from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandboxes.base import Limits, Sandbox
from sandboxes.image import DEFAULT_IMAGE
from sandboxes.untrusted import UntrustedOutputError, parse_json

RUNNER = Path(__file__).with_name("program_runner.py")
DRIVER = Path(__file__).with_name("program_driver.py")
WATCH = Path(__file__).with_name("program_watch.py")
IN_CONTAINER = [RUNNER, WATCH, DRIVER, DRIVER.with_name("program_confinement.py"), DRIVER.with_name("program_guard.py")]
"""Every file of the runner the container gets in ``/grader`` (with the confinement module, built on the host)."""
PROGRAM_STATUSES = ("passed", "failed", "syntax_error", "no_function", "load_error", "forbidden", "output_limit",
                    "memory_limit", "timeout", "exited", "crashed", "error")
TEST_OUTCOMES = ("passed", "failed", "error", "timeout")
VIOLATION_EXIT = 86
SECCOMP_EXIT = -31
"""Killed by SIGSYS: the runner's seccomp filter stopped a process creation, an exec or a signal."""
MAX_CODE_CHARS = 20_000
BATCH_SIZE = 32
"""Programs per container."""
REL_TOL, ABS_TOL = 1e-6, 1e-9


@dataclass(frozen=True)
class ProgramJob:
    """One candidate program and the inputs it is called on (never the expected outputs)."""

    key: str
    code: str
    entry: str
    call: str = "kwargs"
    """``"kwargs"``: each input is a dict of keyword arguments; ``"args"``: a list of positional ones."""
    inputs: tuple = ()


@dataclass(frozen=True)
class ProgramLimits:
    """Limits of one program's process inside the container."""

    per_test_s: float = 3.0
    startup_s: float = 3.0
    memory_mb: int = 512
    cpu_s: int = 20


@dataclass
class ProgramResult:
    """The trusted verdict on one program."""

    status: str
    tests: list[str] = field(default_factory=list)
    passed: int = 0
    total: int = 0
    verified: int = 0
    detail: str = ""
    stderr: str = ""
    errors: list[str] = field(default_factory=list)
    """Per test, the exception the program raised ('' when none): the program's own words, no expected value."""

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def to_info(self) -> dict:
        return asdict(self) | {"share": self.share}


def same_value(got, want) -> bool:
    """Whether a returned JSON value equals the expected one: floats within a tolerance, everything else exact.

    An integer is matched only by an equal integer (or a float exactly equal to it): a tolerance would let the
    reference's answer + 1 pass every output above 10^6.  Booleans never match numbers; lists and dicts match
    element by element, so floats nested in them keep their tolerance and nested integers stay exact.
    """
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float) and isinstance(got, (int, float)):
        try:
            return math.isclose(got, want, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        except OverflowError:  # an integer beyond any float: no float answer is near it (never a crash of the batch)
            return False
    if isinstance(want, int) and isinstance(got, (int, float)):
        return got == want  # exact: Python compares an int and a float without rounding either
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same_value, got, want))
    if isinstance(want, dict):
        return (isinstance(got, dict) and got.keys() == want.keys()
                and all(same_value(got[k], want[k]) for k in want))
    return type(got) is type(want) and got == want


def judge(outcome: dict, expected: list, n: int) -> ProgramResult:
    """The verdict on one runner line (already schema-checked) against the expected values."""
    tests, errors, passed = [], [], 0
    killed = outcome.get("killed_for")
    current = outcome.get("current", -1)
    for i in range(n):
        record = outcome["tests"][i] if i < len(outcome["tests"]) else None
        if record is None:
            tests.append("timeout" if killed == "timeout" and i >= current else "error")
            errors.append("not run" if i != current else (killed or "ended during this test"))
            continue
        value, error = record.get("value"), record.get("error")
        if error is not None or not isinstance(value, str):
            tests.append("error")
            errors.append(_text(str(error or "no value"))[:200])
            continue
        try:
            got = parse_json(value.encode(), "returned value")
        except UnicodeEncodeError:  # a lone surrogate: no text, and never the batch's failure
            tests.append("error")
            errors.append("returned value is not text")
            continue
        except UntrustedOutputError:
            tests.append("error")
            errors.append("returned value is not strict JSON")
            continue
        ok = same_value(got, expected[i])
        tests.append("passed" if ok else "failed")
        errors.append("")
        passed += ok
    status = _status(outcome, tests, errors)
    event = outcome.get("event") or {}
    detail = event.get("detail") or killed or ""
    if status == "forbidden" and outcome.get("exit") == SECCOMP_EXIT:
        detail = ("a forbidden system call: a new process, an exec, a signal, a reach into another process, an "
                  "anonymous memory file, or closing or replacing its result channel")
    return ProgramResult(status=status, tests=tests, passed=passed, total=n, verified=int(status == "passed"),
                         detail=_text(str(detail))[:300],
                         stderr=_text(str(outcome.get("stderr") or ""))[:400], errors=errors)


def _text(said: str) -> str:
    """What a program said (an exception's message, an event's detail), as text any UTF-8 store holds: JSON carries
    lone surrogates, and they stay readable as backslash escapes (``\\udc80``)."""
    return said.encode("utf-8", "backslashreplace").decode("utf-8")


def _status(outcome: dict, tests: list[str], errors: list[str]) -> str:
    event = (outcome.get("event") or {}).get("kind")
    exit_code = outcome.get("exit")
    if event in ("syntax_error", "no_function", "load_error"):
        return event
    if event == "violation" or exit_code in (VIOLATION_EXIT, SECCOMP_EXIT):
        return "forbidden"
    if outcome.get("killed_for") == "output_limit":
        return "output_limit"
    if any(e.startswith("MemoryError") for e in errors) or exit_code == -9 and outcome.get("killed_for") is None:
        return "memory_limit"
    if outcome.get("killed_for") == "timeout" or exit_code in (-24,):  # -24: SIGXCPU, the CPU rlimit
        return "timeout"
    if isinstance(exit_code, int) and exit_code < 0:
        return "crashed"
    if any(e in ("not run", "ended during this test") for e in errors):
        return "exited"
    if tests and all(t == "passed" for t in tests):
        return "passed"
    return "error" if "error" in tests and "failed" not in tests else "failed"


def _outcomes(records: list[dict], indices: set[int]) -> dict[int, dict]:
    """The runner's records regrouped per program index: ``judge``'s input (the parent already checked each
    record's MAC and shape; a program without its ``program`` record is missing)."""
    tests: dict[int, dict[int, dict]] = {}
    out: dict[int, dict] = {}
    for record in records:
        p = record.get("p")
        if not isinstance(p, int) or p not in indices:
            continue
        if record["k"] == "test" and isinstance(record.get("i"), int) and 0 <= record["i"] < 1000:
            tests.setdefault(p, {}).setdefault(record["i"], {"value": record.get("value"),
                                                             "error": record.get("error")})
        elif record["k"] == "program" and p not in out:
            if "runner_error" in record:
                out[p] = {"runner_error": str(record["runner_error"])}
                continue
            current = record.get("current")
            out[p] = {"exit": record.get("exit") if isinstance(record.get("exit"), int) else None,
                      "killed_for": record.get("killed_for") if record.get("killed_for") in ("timeout", "output_limit")
                      else None,
                      "current": current if isinstance(current, int) else -1,
                      "event": {"kind": record.get("event"), "detail": record.get("detail")} if record.get("event")
                      else None,
                      "stderr": record.get("stderr") or ""}
    for p, outcome in out.items():
        if "runner_error" not in outcome:
            got = tests.get(p, {})
            outcome["tests"] = [got.get(i) for i in range(max(got, default=-1) + 1)]
    return out


def run_batch(jobs: list[ProgramJob], image: str, limits: ProgramLimits,
              usage: list[float] | None = None) -> dict[int, dict]:
    """Run ``jobs`` in one container of the shared layer (``execution.container``); the outcome per job index
    that reported.  A batch whose record channel was flagged (bytes no runner wrote) reports nothing.
    ``usage`` gets the container's CPU seconds where its supervisor could read them (for benches only)."""
    from execution.container import Plan, run_plan
    from execution.program_confine_build import confine_module

    payload = {"limits": asdict(limits),
               "programs": [{"index": i, "code": j.code[:MAX_CODE_CHARS], "entry": j.entry, "call": j.call,
                             "inputs": list(j.inputs)} for i, j in enumerate(jobs)]}
    budget = sum(limits.startup_s + limits.per_test_s * max(1, len(j.inputs)) + 1.0 for j in jobs) + 10.0
    plan = Plan(runs=[["python3", "-I", "-S", "/grader/program_runner.py", "supervise", "/grader/batch.json"]],
                run_timeout_s=budget)
    result = run_plan(image, plan, mounts=[], inbox=[*IN_CONTAINER, confine_module()],
                      files={"batch.json": json.dumps(payload)},
                      limits=Limits(timeout_s=budget + 15.0, memory_mb=limits.memory_mb + 256, cpus=1.0, pids=64,
                                    tmpfs_mb=64, output_mb=1, output_total_mb=2, output_files=10),
                      supervised=True)  # the supervisor as root with few capabilities, each program its own uid
    if any(flag.get("layer") == "channel" for flag in result.flags):
        return {}
    cpu = [r.get("cpu_us") for r in result.records if r["k"] == "done"]
    if usage is not None and cpu and type(cpu[0]) is int and cpu[0] >= 0:
        usage.append(cpu[0] / 1e6)
    return _outcomes(result.records, set(range(len(jobs))))


def grade_programs(jobs: list[ProgramJob], expected: dict[str, list], sandbox: Sandbox, *,
                   limits: ProgramLimits = ProgramLimits(), workers: int = 1,
                   batch_size: int = BATCH_SIZE, usage: list[float] | None = None) -> dict[str, ProgramResult]:
    """Each job's verdict, by key; ``workers`` containers at a time, ``batch_size`` programs each.  ``usage``
    gets each container's CPU seconds (``run_batch``)."""
    for job in jobs:
        if len(expected[job.key]) != len(job.inputs):
            raise ValueError(f"program {job.key}: {len(job.inputs)} inputs but {len(expected[job.key])} "
                             "expected values")
    results: dict[str, ProgramResult] = {}
    lock = threading.Lock()

    def grade(batch: list[ProgramJob]) -> list[ProgramJob]:
        """Grade ``batch`` in one container; the jobs to grade again (no record, or the runner's own failure)."""
        lines = run_batch(batch, getattr(sandbox, "image", None) or DEFAULT_IMAGE, limits, usage)
        again = []
        for i, job in enumerate(batch):
            line = lines.get(i)
            if line is None or "runner_error" in line:
                again.append(job)
                if line is not None:
                    with lock:
                        runner_errors[job.key] = line["runner_error"]
            else:
                with lock:
                    results[job.key] = judge(line, expected[job.key], len(job.inputs))
        return again

    runner_errors: dict[str, str] = {}
    batches = [jobs[i:i + batch_size] for i in range(0, len(jobs), batch_size)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        again = [job for left in pool.map(grade, batches) for job in left]
        # Once more, each alone in a fresh container: a container that died mid-batch or a runner failure
        # (a folder, a pipe, an interpreter that did not start) is not the program's fault, and alone no
        # other program can have caused it.
        still = [job for left in pool.map(grade, [[job] for job in again]) for job in left]
    for job in still:
        why = runner_errors.get(job.key)
        detail = f"runner: {why}" if why else "the grading container ended without a result for this program"
        results[job.key] = ProgramResult(status="error", total=len(job.inputs), tests=["error"] * len(job.inputs),
                                         detail=_text(detail)[:300])
    return results

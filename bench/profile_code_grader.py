"""Where a graded program's time goes: Docker's round trips per container, interpreter starts, and each step of
one program's set-up and supervision inside the container.  Prints a table; records nothing.

    .venv/bin/python bench/profile_code_grader.py [--repeat 40] [--starts 10] [--containers 3]

Needs Docker and the sandbox image.  Inside the container it runs ``bench/code_grader_profile_inside.py`` under
the code grader's own settings (``supervised=True``) beside the real runner files.  Each figure is a mean in
milliseconds: ``wall``, and ``cpu`` (CPU seconds of the processes involved; on a loaded machine wall grows, CPU
hardly).  Docker's own CPU (the engine, containerd, runc) is not counted in ``cpu``: its figures are wall only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import records  # noqa: E402
from domains.code_tasks import load_tasks  # noqa: E402
from execution.container import Plan, run_plan  # noqa: E402
from execution.program_confine_build import confine_module  # noqa: E402
from execution.programs import IN_CONTAINER, ProgramJob, ProgramLimits, run_batch  # noqa: E402
from sandboxes.base import Limits  # noqa: E402
from sandboxes.docker import DockerSandbox  # noqa: E402

INSIDE = Path(__file__).with_name("code_grader_profile_inside.py")
LIMITS = Limits(timeout_s=300, memory_mb=768, cpus=1.0, pids=64, tmpfs_mb=64, output_mb=1, output_total_mb=2,
                output_files=10)


def docker_phases(sandbox: DockerSandbox, containers: int) -> dict:
    """One supervised container running ``python3 -I -B -c pass``, call by call."""
    names = ("create", "start", "run and wait", "reload and logs", "remove")
    sums = dict.fromkeys(names, 0.0)
    for _ in range(containers):
        container = sandbox._create(["python3", "-I", "-B", "-c", "pass"], [], LIMITS, {}, supervised=True)
        marks = [time.monotonic()]
        container.start()
        marks.append(time.monotonic())
        container.wait()
        marks.append(time.monotonic())
        container.reload()
        container.logs(stdout=True, stderr=False)
        container.logs(stdout=False, stderr=True)
        marks.append(time.monotonic())
        container.remove(force=True)
        marks.append(time.monotonic())
        for name, (a, b) in zip(names[1:], zip(marks, marks[1:])):
            sums[name] += b - a
    started = time.monotonic()
    for _ in range(containers):
        sandbox._create(["true"], [], LIMITS, {}, supervised=True).remove(force=True)
    sums["create"] = time.monotonic() - started
    return {name: {"wall_ms": total / containers * 1e3} for name, total in sums.items()}


def batches(sandbox: DockerSandbox, program: ProgramJob, containers: int) -> dict:
    """A whole container of the real grader (``run_batch``) with 0, 1 and 32 programs: the host's wall and CPU."""
    out = {}
    for n in (0, 1, 32):
        wall, cpu = time.monotonic(), time.process_time()
        for _ in range(containers):
            run_batch([program] * n, sandbox.image, ProgramLimits())
        out[f"run_batch of {n} programs"] = {"wall_ms": (time.monotonic() - wall) / containers * 1e3,
                                             "host_cpu_ms": (time.process_time() - cpu) / containers * 1e3}
    return out


def inside(sandbox: DockerSandbox, task: dict, repeat: int, starts: int) -> dict:
    config = {"repeat": repeat, "starts": starts,
              "program": {"code": task["reference"], "entry": task["entry"], "call": task["call"],
                          "inputs": [t["input"] for t in task["tests"]],
                          "limits": {k: v for k, v in ProgramLimits().__dict__.items()}}}
    result = run_plan(sandbox.image, Plan(runs=[["python3", "-I", "-S", "/grader/code_grader_profile_inside.py"]],
                                          run_timeout_s=280),
                      mounts=[], inbox=[*IN_CONTAINER, INSIDE, confine_module()],
                      files={"profile.json": json.dumps(config)},
                      limits=LIMITS, supervised=True)
    for line in result.sandbox.stderr.splitlines():
        if line.startswith("PROFILE "):
            return json.loads(line[len("PROFILE "):])
    raise SystemExit(f"the profile printed nothing; its stderr ends: {result.sandbox.stderr[-2000:]}")


def show(title: str, rows: dict) -> None:
    print(f"\n{title}")
    for name, figures in rows.items():
        if isinstance(figures, dict):
            text = "  ".join(f"{k} {v:8.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items())
        else:
            text = str(figures)
        print(f"  {name:<62} {text}")


def main() -> None:
    parser = records.BenchParser(description=__doc__, formatter_class=records.argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=records.positive, default=40, help="programs per step measured inside")
    parser.add_argument("--starts", type=records.positive, default=10, help="interpreter starts per kind")
    parser.add_argument("--containers", type=records.positive, default=3, help="containers per Docker measure")
    args = parser.parse_args()
    sandbox = DockerSandbox()
    task = [t for t in load_tasks() if t["source"] == "codeio"][0]
    job = ProgramJob("p", task["reference"], entry=task["entry"], call=task["call"],
                     inputs=tuple(t["input"] for t in task["tests"]))
    print(f"load before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; task {task['id']}, "
          f"{len(task['tests'])} tests")
    with tempfile.TemporaryDirectory():
        show("Docker, per supervised container (wall only: the engine's CPU is not ours to count)",
             docker_phases(sandbox, args.containers))
        show("The real grader's container, per container (host side)", batches(sandbox, job, args.containers))
        report = inside(sandbox, task, args.repeat, args.starts)
    show("Interpreter starts inside the container, per start", report["starts"])
    show("A program's process, set-up step by step (in its own fork), per program", report["set_up"])
    show("The supervisor's side with the real empty interpreter, per program", report["supervisor"])
    print(f"\nload after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

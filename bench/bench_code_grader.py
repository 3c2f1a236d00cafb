"""Program grader throughput: programs graded per second with 1 and 2 workers (containers at a time).

    .venv/bin/python bench/bench_code_grader.py [--programs 128] [--batch 32] [--record FILE | --no-record]

Grades the shipped tasks' reference solutions (each passes every hidden test) and as many wrong
programs, in containers of the shared execution layer; needs Docker and the sandbox image.
Prints one table; each figure includes container start and removal.  "CPU ms/program" is every container's
own CPU (its cgroup: trusted parent, supervisor, empty interpreter, programs) plus this process's, per program:
far less sensitive to the machine's load than programs/s; the engine's own CPU (dockerd, runc) is left out.
The last column is the machine's 1-minute load average when the row started: compare figures only from rows
measured under similar load (run the old and the new grader back to back, e.g. the old one from ``git archive``
of its commit).

Measured for issue 46 (each program in its own process forked from an empty interpreter, seccomp-filtered),
2 workers, same window, old tree then new: see docs/code-grader.md.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import records  # noqa: E402
from domains.code_tasks import load_tasks  # noqa: E402
from execution.programs import ProgramJob, grade_programs  # noqa: E402
from sandboxes.docker import DockerSandbox  # noqa: E402


def jobs_for(n: int) -> tuple[list[ProgramJob], dict[str, list]]:
    """``n`` programs: references and wrong ones (the first test's output returned for every input), alternating."""
    jobs, expected = [], {}
    tasks = [t for t in load_tasks() if t["source"] == "codeio"]
    for i in range(n):
        task = tasks[(i // 2) % len(tasks)]
        inputs = tuple(t["input"] for t in task["tests"])
        code = task["reference"] if i % 2 == 0 else \
            f"def {task['entry']}(**kwargs):\n    return {task['tests'][0]['output']!r}\n"
        key = f"{i}:{task['id']}"
        jobs.append(ProgramJob(key, code, entry=task["entry"], call=task["call"], inputs=inputs))
        expected[key] = [t["output"] for t in task["tests"]]
    return jobs, expected


def main() -> None:
    parser = records.parser("bench_code_grader", __doc__)
    parser.add_argument("--programs", type=records.positive, default=128)
    parser.add_argument("--batch", type=records.positive, default=32, help="programs per container")
    args = parser.parse_args()
    load_before = records.load_now()
    sandbox = DockerSandbox()
    jobs, expected = jobs_for(args.programs)
    rows = []
    for workers in (1, 2):
        load = os.getloadavg()[0]
        usage: list[float] = []
        started, host_cpu = time.monotonic(), time.process_time()
        results = grade_programs(jobs, expected, sandbox, workers=workers, batch_size=args.batch, usage=usage)
        seconds, host_cpu = time.monotonic() - started, time.process_time() - host_cpu
        verified = sum(r.verified for r in results.values())
        # CPU per program: every container's own count (supervisor, empty interpreter, programs, trusted parent)
        # plus this process's; the engine's (dockerd, containerd, runc) is not ours to count
        cpu_ms = (sum(usage) + host_cpu) / len(jobs) * 1e3 if len(usage) == -(-len(jobs) // args.batch) else None
        rows.append((workers, len(jobs), args.batch, seconds, len(jobs) / seconds, cpu_ms, verified, load))
    print(f"{'workers':>7} {'programs':>8} {'per container':>13} {'seconds':>8} {'programs/s':>10} "
          f"{'CPU ms/program':>14} {'verified':>8} {'load':>5}")
    for workers, n, batch, seconds, rate, cpu_ms, verified, load in rows:
        cpu = f"{cpu_ms:14.1f}" if cpu_ms is not None else f"{'-':>14}"
        print(f"{workers:>7} {n:>8} {batch:>13} {seconds:>8.1f} {rate:>10.2f} {cpu} {verified:>8} {load:>5.1f}")
    figures = {f"programs_per_s_{row[0]}_workers": round(row[4], 2) for row in rows}
    figures |= {f"cpu_ms_per_program_{row[0]}_workers": round(row[5], 1) for row in rows if row[5] is not None}
    records.write(args, {"programs": args.programs, "batch": args.batch}, figures, load_before=load_before)


if __name__ == "__main__":
    main()

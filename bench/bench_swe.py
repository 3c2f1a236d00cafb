"""SWE task figures: build and check a task, start a task container, grade patches (1 and 2 workers).

    .venv/bin/python bench/bench_swe.py [--task sqlparse-0.5.5-begin-transaction] [--patches 8]
    git worktree add /tmp/before 2edbe9e      # the grader before issue 21's redesign
    .venv/bin/python bench/bench_swe.py --compare-before /tmp/before [--tasks A,B] [--patches 4]

``--compare-before DIR`` grades the gold patch of each task with this tree's grader and with the one
in ``DIR`` (each in its own process, one worker, alternating rounds so both see the same load; each
tree's tasks must be checked: ``tasks build --domain swe`` in each) and prints graded patches per
minute for both.

The build is measured on a copy of the spec under another id (a fresh cache folder and its own
image tag, removed afterwards), so the shipped task's image and check record are left alone.
Needs Docker and PyPI (for the fresh download); prints one table.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandboxes.base import Limits  # noqa: E402
from sandboxes.docker import DockerSandbox, connect_engine  # noqa: E402
from swe_env.build import check_spec  # noqa: E402
from swe_env.checked import load_task
from swe_env.grade import ContainerCap, grade  # noqa: E402
from swe_env.sdist import CACHE_ENV, lay_out  # noqa: E402
from swe_env.spec import SPECS_DIR, load_spec  # noqa: E402
from swe_env.task_image import build_task_image, image_key  # noqa: E402
from swe_env.tasks import gold_patch  # noqa: E402

import records  # noqa: E402


def timed(fn) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def build_figures(task_id: str) -> list[tuple[str, str]]:
    spec = dataclasses.replace(load_spec(SPECS_DIR / f"{task_id}.yaml"), id=f"bench-{task_id}"[:80])
    previous = os.environ.get(CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="bench-swe-") as cache:
        os.environ[CACHE_ENV] = cache
        try:
            layout_s = timed(lambda: lay_out(spec, image_key(spec), log=lambda _: None))
            layout = lay_out(spec, image_key(spec), log=lambda _: None)
            tag: list[str] = []
            image_s = timed(lambda: tag.append(build_task_image(spec, layout, log=lambda _: None)))
            record = check_spec(spec, log=lambda _: None)
            recheck_s = timed(lambda: check_spec(spec, log=lambda _: None))
        finally:
            if previous is None:
                os.environ.pop(CACHE_ENV, None)
            else:
                os.environ[CACHE_ENV] = previous
            if tag:
                connect_engine().images.remove(tag[0], force=True)
    runs = {k: v for k, v in record.timings.items() if k.startswith(("before", "after", "collect"))}
    return [
        ("download both sdists + lay out (s)", f"{layout_s:.1f}"),
        ("build the task image (s)", f"{image_s:.1f}"),
        (f"check: {len(runs)} test runs in containers (s)", f"{sum(runs.values()):.1f}"),
        ("  one test run, median (s)", f"{statistics.median(runs.values()):.2f}"),
        ("re-check of a checked spec (cached, s)", f"{recheck_s:.3f}"),
        ("check verdict", f"{record.status}, {len(record.pass_to_pass)} PASS_TO_PASS"),
    ]


def grade_figures(task_id: str, patches: int) -> list[tuple[str, str]]:
    task = load_task(task_id)
    sandbox = DockerSandbox(task.image)
    with tempfile.TemporaryDirectory() as out:
        starts = [sandbox.run(["true"], mounts=[], output_dir=Path(out), limits=Limits(timeout_s=60)).duration_s
                  for _ in range(5)]
    gold = gold_patch(task)
    singles = [grade(task, gold).duration_s for _ in range(3)]
    rows = [("container start + exit, median of 5 (s)", f"{statistics.median(starts):.2f}"),
            (f"grade the gold patch ({len(task.fail_to_pass) + len(task.pass_to_pass)} tests), median (s)",
             f"{statistics.median(singles):.2f}"),
            ("grade an empty patch (s)", f"{grade(task, '').duration_s:.4f}")]
    for workers in (1, 2):
        ContainerCap.set_limit(workers)
        start = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            verdicts = list(pool.map(lambda _: grade(task, gold).status, range(patches)))
        elapsed = time.monotonic() - start
        assert verdicts == ["resolved"] * patches, verdicts
        rows.append((f"graded patches per minute, {workers} worker(s)", f"{patches / elapsed * 60:.1f}"))
    return rows


_THROUGHPUT = """
import sys, time
from swe_env.grade import grade
from swe_env.tasks import gold_patch
from swe_env.checked import load_task
task = load_task(sys.argv[1]); gold = gold_patch(task); n = int(sys.argv[2])
start = time.monotonic()
verdicts = [grade(task, gold).status for _ in range(n)]
assert verdicts == ["resolved"] * n, verdicts
print(n / (time.monotonic() - start) * 60)
"""


def compare_before(before: Path, tasks: list[str], patches: int, rounds: int = 2) -> list[tuple[str, str]]:
    """Graded gold patches per minute, this tree's grader against ``before``'s, alternating rounds."""
    import subprocess

    here = Path(__file__).resolve().parents[1]
    rows = []
    for task_id in tasks:
        rates: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(rounds):
            for label, tree in (("before", before.resolve()), ("after", here)):
                proc = subprocess.run([sys.executable, "-c", _THROUGHPUT, task_id, str(patches)], cwd=tree,
                                      capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
                if proc.returncode != 0:
                    raise SystemExit(f"{label} ({tree}) failed on {task_id}: {proc.stderr[-1500:]}")
                rates[label].append(float(proc.stdout.strip().splitlines()[-1]))
        b, a = statistics.mean(rates["before"]), statistics.mean(rates["after"])
        rows += [(f"{task_id}: graded patches/min before", f"{b:.1f} {[round(x, 1) for x in rates['before']]}"),
                 (f"{task_id}: graded patches/min after", f"{a:.1f} {[round(x, 1) for x in rates['after']]}"),
                 (f"{task_id}: cost per grade, after / before", f"{b / a:.2f}x")]
    return rows


def main() -> int:
    parser = records.parser("bench_swe", __doc__)
    parser.add_argument("--task", default="sqlparse-0.5.5-begin-transaction")
    parser.add_argument("--patches", type=records.positive, default=8, help="gold patches graded per worker setting")
    parser.add_argument("--compare-before", type=Path, help="a checkout of the grader to compare throughput with")
    parser.add_argument("--tasks", default="sqlparse-0.5.5-begin-transaction,cachetools-7.3.2-shallow-copy",
                        help="comma-separated task ids for --compare-before")
    args = parser.parse_args()
    if args.compare_before and not (args.compare_before / "swe_env" / "grade.py").is_file():
        records.refuse(f"--compare-before {args.compare_before} holds no swe_env/grade.py: give a checkout of this "
                       "repository (git worktree add DIR COMMIT)")
    load_before = records.load_now()
    if args.compare_before:
        rows = compare_before(args.compare_before, args.tasks.split(","), args.patches)
    else:
        rows = [*build_figures(args.task), *grade_figures(args.task, args.patches)]
    what = f"tasks {args.tasks}" if args.compare_before else f"task {args.task}"
    print(f"{what} on {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.2f})")
    width = max(len(name) for name, _ in rows)
    print(f"{'figure':<{width}}  value\n{'-' * width}  -----")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    config = {"compare_before": str(args.compare_before), "tasks": args.tasks} if args.compare_before else \
        {"task": args.task}
    records.write(args, {**config, "patches": args.patches}, dict(rows), load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The README's first claim, measured: the default run (``python -m meta_agent --domain math --draw-seed 0``) and
its record in ``bench/results/default-run.jsonl``, which ``bench/tables.py`` turns into the README's table.

    .venv/bin/python bench/default_run.py                          # run it in a fresh folder, then record it
    .venv/bin/python bench/default_run.py --from-run /tmp/defrun   # record a default run that already finished

The record holds what the table recomputes from (the exam's size, the tasks each policy solved, the tasks gained
and lost between rounds), the merges the harness repo shows, the run's seconds and the machine's load, stamped as
every bench record is (``bench/records.py``).  ``--from-run`` reads the run's archive and harness repo; a run that
did not finish all its rounds is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import records  # noqa: E402

COMMAND = ["-m", "meta_agent", "--domain", "math", "--draw-seed", "0"]


def figures(run_dir: Path) -> dict:
    """The exam of the base policy and of every round, the paired counts, and the merges, from a finished run."""
    from harness_repo.repo import HarnessRepo
    from meta_agent.heldout_stats import outcomes_by_task
    from meta_agent.run_dir import RunDir
    from rl_backend.archive import Archive

    run = RunDir(run_dir)
    config = run.config()
    run_id, rounds = config["run_id"], int(config.get("rounds", 3))
    archive = Archive(run.archive)
    result0 = run.round_dir(0) / "train" / "result.json"
    if not result0.exists():
        records.refuse(f"{run_dir} has no trained round 0: give the folder of a finished default run")
    base = json.loads(result0.read_text())["eval"].get("base_outcomes") or {}
    exams = {str(k): outcomes_by_task(archive.rows(run_id=run_id, round=k, split="heldout")) for k in range(rounds)}
    unfinished = [k for k, o in exams.items() if not o]
    if unfinished or not base:
        records.refuse(f"{run_dir}: no held-out exam for round(s) {', '.join(unfinished) or 'base'}; "
                       "record a run that finished every round")
    n = len(base)
    correct = {"base": int(sum(base.values())), **{k: int(sum(o.values())) for k, o in exams.items()}}

    def pair(after: str, before: str) -> dict:
        a, b = exams[after], exams[before]
        return {"gained": sum(1 for t in a if a[t] > b.get(t, 0)), "lost": sum(1 for t in a if a[t] < b.get(t, 0))}

    last = str(rounds - 1)
    paired = {f"{last}-0": pair(last, "0")} | ({f"{last}-{rounds - 2}": pair(last, str(rounds - 2))}
                                              if rounds > 2 else {})
    merges = [f"{iv.branch.split('-', 1)[-1]} (round {iv.round}" + (", reverted)" if iv.status == "reverted" else ")")
              for iv in sorted(HarnessRepo.open(run.harness).interventions(), key=lambda iv: (iv.round, iv.branch))
              if iv.merge_commit]
    return {"exam_n": n, "correct": correct, "paired": paired, "merges": merges, "rounds": rounds}


def main() -> int:
    parser = records.parser("default-run", __doc__)
    parser.add_argument("--from-run", type=Path, help="record this finished default run instead of running one")
    parser.add_argument("--seconds", type=records.positive, help="with --from-run: the run's wall time, if measured")
    args = parser.parse_args()
    if args.from_run is not None and not (args.from_run / "run.json").is_file():
        records.refuse(f"{args.from_run} is not a run folder (no run.json): give the --run-dir of a finished run")
    load = records.load_now()
    seconds = args.seconds
    run_dir = args.from_run
    if run_dir is None:
        run_dir = Path(tempfile.mkdtemp(prefix="default-run-")) / "run"
        started = time.monotonic()
        done = subprocess.run([sys.executable, *COMMAND, "--run-dir", str(run_dir)], cwd=ROOT)
        seconds = round(time.monotonic() - started)
        if done.returncode != 0:
            print(f"default_run: the run failed (exit {done.returncode}); its folder is {run_dir}", file=sys.stderr)
            return 1
    found = figures(run_dir)
    record = {"bench": "default-run", **records.stamp({"command": "python " + " ".join(COMMAND), "seed": 0,
                                                        "draw_seed": 0, "rounds": found["rounds"]}, load),
              **found, "seconds": seconds,
              "provenance": "the run's held-out archive rows and harness repo"}
    print(json.dumps({k: record[k] for k in ("correct", "paired", "merges")}))
    if not args.no_record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        with open(args.record, "a", encoding="utf-8") as handle:  # one line, one write: earlier records survive
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        print(f"recorded in {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

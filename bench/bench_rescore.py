"""Benchmark: ``rescore`` of a synthetic archive, and a backtest of every group, over 1 and 2 local Ray workers.

Builds a run folder in a temporary directory: the math seed harness and an archive of
``--rows`` trajectories (default 10,000,000) in parts of ``--part-rows`` (one round per part;
4,000 synthetic math rows with their verifier outcomes, tiled with fresh ids).  Then re-scores it
(``meta_agent.judge.rescore.rescore_run``: main's harness in a sandbox per shard, the trusted
verifier on the host) with 1 worker and with 2, both through a local Ray of 2 CPUs, and prints:
rows/s in all and per worker, the scaling from 1 to 2 workers, the peak RSS of a worker process
and of a shard's sandbox, and the projected time for 100M rows on N workers (the 2-worker rate per
worker, times N: linear, as shards share nothing but the filesystem).  Then, on an archive of ``--backtest-rows``
(default 200,000) in parts of the same size, one arm of ``backtest --groups all`` (main's harness over
every group: ``meta_agent.judge.sharded_backtest``) unsharded, and sharded over 1 and 2 workers.
Not part of the tests.

    .venv/bin/python bench/bench_rescore.py                           # 10M rows: ~1 h on 2 cores (README)
    .venv/bin/python bench/bench_rescore.py --rows 40000 --part-rows 10000 --backtest-rows 40000

The figures go to ``bench/results/bench_rescore.jsonl`` (``--record FILE`` elsewhere, ``--no-record`` none).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import records
from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.judge.harness_runs import run_harness
from meta_agent.judge.rescore import rescore_run
from meta_agent.judge.sharded_backtest import ShardedRunner, sample_all
from meta_agent.run_dir import RunDir
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.docker import DockerSandbox

RUN_ID = "bench"


def build_run(root: Path, n_rows: int, part_rows: int, name: str = "run") -> RunDir:
    """A run folder whose archive holds ``n_rows`` rows, one part of ``part_rows`` per round."""
    run = root / name
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": RUN_ID}))
    repo = HarnessRepo.create(run / "harness", "math")
    base = synthetic_math_rows(RUN_ID, 0, n_groups=1000, group_size=4, seed=0, harness_commit=repo.head("main"),
                               verify=MathDomain().verify)
    for row in base:
        row["reward"] = row["verified"]
    seed = Archive(root / f"{name}-seed")
    seed.append_round(RUN_ID, 0, base)
    tile = seed.read()
    archive, written, round_ = Archive(run / "archive"), 0, 0
    while written < n_rows:
        size = min(part_rows, n_rows - written)
        with archive.round_writer(RUN_ID, round_) as writer:
            done = 0
            while done < size:
                chunk = tile.slice(0, min(tile.num_rows, size - done))
                suffix = pa.scalar(f"-r{round_}c{done}")
                for name in ("traj_id", "group_id"):
                    chunk = chunk.set_column(chunk.schema.get_field_index(name), name,
                                             pc.binary_join_element_wise(chunk.column(name), suffix, ""))
                chunk = chunk.set_column(chunk.schema.get_field_index("round"), "round",
                                         pa.array([round_] * chunk.num_rows, chunk.schema.field("round").type))
                writer.write(chunk)
                done += chunk.num_rows
        written += size
        round_ += 1
    return RunDir(run)


def main() -> None:
    import ray

    parser = records.parser("bench_rescore", __doc__)
    parser.add_argument("--rows", type=records.positive, default=10_000_000)
    parser.add_argument("--part-rows", type=records.positive, default=100_000,
                        help="rows per archive part (one shard each)")
    parser.add_argument("--backtest-rows", type=records.positive, default=200_000,
                        help="rows of the backtest's archive")
    args = parser.parse_args()
    load = records.load_now()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rd = build_run(Path(tmp), args.rows, args.part_rows)
        built = time.perf_counter() - t0
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        measured = {}
        try:
            for workers in (1, 2):
                shutil.rmtree(rd.path / "rescore" / "cache", ignore_errors=True)  # each run scores in its sandboxes
                t0 = time.perf_counter()
                summary = rescore_run(rd, workers=workers, ray_address="local")
                wall = time.perf_counter() - t0
                resources = [s.get("resources") or {} for s in summary["shards"]]
                measured[workers] = {"wall": wall, "rows": summary["rows"], "parts": summary["parts"],
                                     "worker_mb": max(r.get("worker_peak_mb") or 0 for r in resources),
                                     "sandbox_mb": max(r.get("sandbox_peak_mb") or 0 for r in resources)}
            backtest = measure_backtest(build_run(Path(tmp), args.backtest_rows, args.part_rows, "backtest"))
        finally:
            ray.shutdown()
    one = measured[1]
    print(f"rescore of {args.rows:,} rows in {one['parts']} parts (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; archive built in {built:.0f} s)")
    print(f"{'workers':>7}{'wall s':>9}{'rows/s':>9}{'rows/s/worker':>15}{'scaling':>9}{'worker MB':>11}"
          f"{'sandbox MB':>12}")
    for workers, m in measured.items():
        rate = m["rows"] / m["wall"]
        print(f"{workers:>7}{m['wall']:>9.1f}{rate:>9.0f}{rate / workers:>15.0f}"
              f"{rate / (one['rows'] / one['wall']):>9.2f}{m['worker_mb']:>11.0f}{m['sandbox_mb']:>12.0f}")
    per_worker = measured[2]["rows"] / measured[2]["wall"] / 2
    print("projected time for 100,000,000 rows (linear in workers at the 2-worker rate per worker):")
    for n in (2, 8, 32, 128):
        hours = 100_000_000 / (per_worker * n) / 3600
        print(f"  {n:>4} workers: {hours:8.2f} h")
    base = backtest["unsharded"]
    print(f"\none arm of backtest --groups all over {base['rows']:,} rows in {base['parts']} parts (main's harness)")
    print(f"{'how':>22}{'wall s':>9}{'traj/s':>9}{'vs unsharded':>14}")
    for how, m in backtest.items():
        print(f"{how:>22}{m['wall']:>9.1f}{m['rows'] / m['wall']:>9.0f}{base['wall'] / m['wall']:>14.2f}")
    records.write(args, {"rows": args.rows, "part_rows": args.part_rows, "backtest_rows": args.backtest_rows}, {
        "rescore": {f"{w} workers": {"wall_s": round(m["wall"], 2), "rows_per_s": round(m["rows"] / m["wall"]),
                                     "worker_mb": m["worker_mb"], "sandbox_mb": m["sandbox_mb"]}
                    for w, m in measured.items()},
        "backtest_all": {how: {"wall_s": round(m["wall"], 2), "traj_per_s": round(m["rows"] / m["wall"])}
                         for how, m in backtest.items()}}, load)


def measure_backtest(rd: RunDir) -> dict[str, dict]:
    """Wall time of one arm of ``backtest --groups all`` over ``rd``'s archive: here, then over 1 and 2 workers."""
    archive, sandbox = Archive(rd.archive), DockerSandbox()
    repo = HarnessRepo.open(rd.harness)
    settings = BacktestSettings(timeout_s=600)
    sample = sample_all(archive, settings)
    parts = len(list(archive.root.rglob("part-*.parquet")))
    out: dict[str, dict] = {}
    for how, workers in (("unsharded", 0), ("sharded, 1 worker", 1), ("sharded, 2 workers", 2)):
        shutil.rmtree(rd.path / "bench-cache", ignore_errors=True)  # each arm scores in its sandboxes
        runner = ShardedRunner(archive, workers) if workers else None
        t0 = time.perf_counter()
        if runner is None:
            run = run_harness(repo, repo.head("main"), sample, sandbox, rd.path / "bench-cache", settings, (0.0, 1.0))
        else:
            with runner:
                run = runner(repo, repo.head("main"), sample, sandbox, rd.path / "bench-cache", settings, (0.0, 1.0))
        assert run.failure is None, run.failure
        out[how] = {"wall": time.perf_counter() - t0, "rows": len(sample.rows), "parts": parts}
    return out


if __name__ == "__main__":
    main()

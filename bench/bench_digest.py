"""Benchmark: the digest of one 1M-row round, as the loop's digest phase builds it.

Writes a round of ``--rows`` trajectories (default 1,000,000: synthetic math rows, the
verifier's outcome on each, replicated with fresh ids and groups of 4) into a temporary
archive, then, in a fresh subprocess so that its peak memory is its own, reads the round
and builds the digest as the loop's digest phase does (``meta_agent.review.digest_columns``:
the columns it needs, figures with numpy); with ``--rows-way`` also as it was (``Archive.rows`` into dicts,
``meta_agent.digest.build_digest``).
Prints the seconds of each step and the process's peak RSS (``ru_maxrss``) with the machine's
load average.  Goal: <= 10 s and <= 2 GB.

    .venv/bin/python bench/bench_digest.py                             # 1,000,000 rows
    .venv/bin/python bench/bench_digest.py --rows 200000 --rows-way    # both ways

The figures go to ``bench/results/bench_digest.jsonl`` (``--record FILE`` elsewhere, ``--no-record`` none).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import records

RUN_ID = "bench"


def write_round(root: Path, n_rows: int) -> None:
    """``n_rows`` rows of round 0: 4,000 synthetic rows tiled, each copy with its own ids and groups."""
    from domains.math import MathDomain
    from rl_backend.archive import Archive
    from rl_backend.synthetic import synthetic_math_rows

    base = synthetic_math_rows(RUN_ID, 0, n_groups=1000, group_size=4, seed=0, verify=MathDomain().verify)
    for row in base:
        row["reward"] = row["verified"]
    archive = Archive(root)
    seed = archive.root / "seed"
    Archive(seed).append_round(RUN_ID, 0, base)
    table = Archive(seed).read()
    with archive.round_writer(RUN_ID, 0) as writer:
        for copy in range(-(-n_rows // table.num_rows)):
            chunk = table.slice(0, min(table.num_rows, n_rows - copy * table.num_rows))
            suffix = pa.scalar(f"-c{copy}")
            chunk = chunk.set_column(chunk.schema.get_field_index("traj_id"), "traj_id",
                                     pc.binary_join_element_wise(chunk.column("traj_id"), suffix, ""))
            chunk = chunk.set_column(chunk.schema.get_field_index("group_id"), "group_id",
                                     pc.binary_join_element_wise(chunk.column("group_id"), suffix, ""))
            writer.write(chunk)
    import shutil

    shutil.rmtree(seed)


def measure(root: Path, way: str) -> dict:
    """In this process: read the round and build its digest ``way`` (rows | columns); seconds and peak RSS."""
    from meta_agent.digest import build_digest
    from meta_agent.review.digest_columns import build_digest_from_table, read_round
    from rl_backend.archive import Archive

    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kwargs = {"metrics": [], "findings": [], "eval": {"heldout_accuracy": 0.5}, "previous": []}
    t0 = time.perf_counter()
    if way == "rows":
        data = Archive(root).rows(run_id=RUN_ID, round=0, split="train")
        t1 = time.perf_counter()
        digest = build_digest(0, data, **kwargs)
    else:
        table = read_round(Archive(root), RUN_ID, 0)
        t1 = time.perf_counter()
        digest = build_digest_from_table(0, table, **kwargs)
    t2 = time.perf_counter()
    return {"rows": digest["n_trajectories"], "read_s": t1 - t0, "digest_s": t2 - t1,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "imports_mb": start_rss / 1024}


def main() -> None:
    parser = records.parser("bench_digest", __doc__)
    parser.add_argument("--rows", type=records.positive, default=1_000_000)
    parser.add_argument("--rows-way", action="store_true",
                        help="also time the row-dict digest (minutes and several GB at 1M rows)")
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1])))
        return
    ways = ["columns", "rows"] if args.rows_way else ["columns"]
    load = records.load_now()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        write_round(Path(tmp), args.rows)
        written = time.perf_counter() - t0
        for way in ways:
            proc = subprocess.run([sys.executable, __file__, "--measure", tmp, way], capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"the {way} digest failed: {proc.stderr.strip()[-1500:]}")
            results[way] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"digest of a {args.rows:,}-row round (load average {os.getloadavg()[0]:.1f}; archive written in "
          f"{written:.1f} s); goal <= 10 s and <= 2048 MB")
    print(f"{'way':<46}{'read s':>8}{'digest s':>10}{'total s':>9}{'peak MB':>9}")
    names = {"columns": "columns (read_round + build_digest_from_table)", "rows": "rows (Archive.rows + build_digest)"}
    for way, m in results.items():
        print(f"{names[way]:<46}{m['read_s']:>8.2f}{m['digest_s']:>10.2f}{m['read_s'] + m['digest_s']:>9.2f}"
              f"{m['peak_mb']:>9.0f}")
    records.write(args, {"rows": args.rows, "ways": ways}, {
        way: {"read_s": round(m["read_s"], 3), "digest_s": round(m["digest_s"], 3),
              "total_s": round(m["read_s"] + m["digest_s"], 3), "peak_mb": round(m["peak_mb"])}
        for way, m in results.items()}, load)


if __name__ == "__main__":
    main()

"""A bench a test runs records into ``$BENCH_RECORDS_DIR`` (the suite sets it), never into ``bench/results/``:
a record there is quoted by the pages' tables, so the suite must leave that folder as it found it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_bench_run_by_the_suite_records_outside_bench_results(tmp_path: Path) -> None:
    before = _sizes()
    env = dict(os.environ, BENCH_RECORDS_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "bench/bench_digest.py", "--rows", "2000"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["bench_digest.jsonl"]
    assert _sizes() == before  # bench_digest.jsonl is there already: an append shows in its size


def _sizes() -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (ROOT / "bench" / "results").iterdir()}


def test_the_suite_sets_the_records_folder_to_a_temporary_one() -> None:
    folder = Path(os.environ["BENCH_RECORDS_DIR"])
    assert folder.is_dir() and (ROOT / "bench" / "results") not in [folder, *folder.parents]

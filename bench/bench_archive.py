"""Benchmark: drawing a backtest sample from a 1M-row trajectory archive, with the project's own code.

Writes an archive of 1,000,000 rows through ``rl_backend.archive.Archive.append_round`` (one run, 50 rounds of
2,400 GRPO groups of 8 plus 800 held-out rows; every tenth round has no verifier outcome, as a verl dump imported
without a verifier), then, each in a fresh subprocess so that its peak memory is its own:

- ``read all``: ``Archive.read()``, every row and column in one table (what a draw cost before the pushdown: the
  floor any whole-archive approach pays);
- ``draw N``: ``meta_agent.backtest.draw_sample`` for 64 and 512 groups (filters pushed into the Parquet scan,
  four columns read to choose, then only the chosen groups' rows), twice, which must return the same sample.

Peak RSS is the process's ``ru_maxrss``; "above imports" subtracts the RSS after imports; "arrow peak" is
pyarrow's memory pool high-water mark. One run per cell, on whatever else the machine is doing: the load average
is recorded with the figures. About a minute on 2 cores; the archive is written to a temporary folder unless
``--root`` is given. The figures go to ``bench/results/bench_archive.jsonl`` (``--no-record``: print only).

    .venv/bin/python bench/bench_archive.py
    .venv/bin/python bench/bench_archive.py --rounds 2       # 40,000 rows, the smallest useful size
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import records
from meta_agent.backtest import draw_sample
from meta_agent.config import BacktestSettings
from rl_backend.archive import Archive, sample_id, validate_rows
from trajectory.schema import SCHEMA_VERSION, TRAJECTORY_SCHEMA

GROUPS_PER_ROUND, GROUP_SIZE, HELDOUT_PER_ROUND = 2400, 8, 800
SOURCES = ("reasoning_gym/chain_sum", "reasoning_gym/products", "reasoning_gym/gcd", "reasoning_gym/basic_arithmetic")
DRAWS = (64, 512)
SEED = 0
WORDS = "the sum of we add carry then result so answer is first next number digit check again".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def round_table(round: int, seed: int = 0) -> pa.Table:
    """One round's rows in the trajectory schema, built column by column (no per-row dicts)."""
    rng, np_rng = random.Random(f"{seed}-{round}"), np.random.default_rng(seed * 1000 + round)
    n_train, n = GROUPS_PER_ROUND * GROUP_SIZE, GROUPS_PER_ROUND * GROUP_SIZE + HELDOUT_PER_ROUND
    group = np.concatenate([np.repeat(np.arange(GROUPS_PER_ROUND), GROUP_SIZE), np.arange(HELDOUT_PER_ROUND)])
    sample = np.concatenate([np.tile(np.arange(GROUP_SIZE), GROUPS_PER_ROUND), np.zeros(HELDOUT_PER_ROUND, int)])
    step = np.where(np.arange(n) < n_train, group // 16, 150)
    heldout = np.arange(n) >= n_train
    source = np_rng.integers(0, len(SOURCES), GROUPS_PER_ROUND + HELDOUT_PER_ROUND)
    source = np.concatenate([np.repeat(source[:GROUPS_PER_ROUND], GROUP_SIZE), source[GROUPS_PER_ROUND:]])
    task = np_rng.integers(0, 4096, n)
    prompts = [f"What is {i} {_text(rng, 20)}? Give the final answer." for i in range(4096)]
    responses = [f"{_text(rng, 80)}\nAnswer: {i}" for i in range(8192)]
    answer = np_rng.integers(0, 8192, n)
    verified = (answer % 3 == 0).astype(float)
    ids = [f"bench-r{round}-heldout-{g}" if h else f"bench-r{round}-s{s}-g{g}-{k}"
           for g, k, s, h in zip(group.tolist(), sample.tolist(), step.tolist(), heldout.tolist())]
    groups = [f"heldout-{g}" if h else f"s{s}-g{g}" for g, s, h in zip(group.tolist(), step.tolist(), heldout.tolist())]
    prompt = pa.array(prompts).take(pa.array(task))
    response = pa.array(responses).take(pa.array(answer))
    quoted = pa.array([json.dumps(t) for t in prompts]).take(pa.array(task)), pa.array(
        [json.dumps(t) for t in responses]).take(pa.array(answer))
    messages = pc.binary_join_element_wise('[{"role": "user", "content": ', quoted[0],
                                           '}, {"role": "assistant", "content": ', quoted[1], '}]', "")
    task_json = [json.dumps({"question": p, "vars": {"id": f"t{i}", "config": {}}}) for i, p in enumerate(prompts)]
    columns = {
        "traj_id": ids, "run_id": ["bench"] * n, "round": np.full(n, round), "step": step, "group_id": groups,
        "sample_idx": sample, "domain": ["math"] * n, "task_id": [f"t{t}" for t in task.tolist()],
        "data_source": pa.array(SOURCES).take(pa.array(source)),
        "split": np.where(heldout, "heldout", "train").tolist(), "prompt": prompt, "response": response,
        "messages": messages, "ground_truth": [f'{{"answer": "{a}"}}' for a in answer.tolist()],
        "reward": verified, "reward_info": ['{"score": 1.0}' if v else '{"score": 0.0}' for v in verified],
        "verified": pa.nulls(n, pa.float64()) if round % 10 == 9 else verified,
        "verifier_info": ['{"reason": "exact", "pred": "1", "method": "numeric"}'] * n,
        "response_tokens": np.full(n, 96), "truncated": np.zeros(n, bool), "finish_reason": ["stop"] * n,
        "harness_commit": ["3f2a9c1e" * 5] * n, "policy_ref": [f"runs/bench/policy/round-{round}"] * n,
        "kept": pa.nulls(n, pa.bool_()),  # as verl and imports leave it
        "task": pa.array(task_json).take(pa.array(task)), "schema_version": np.full(n, SCHEMA_VERSION),
    }
    table = pa.table({f.name: pa.array(columns[f.name]).cast(f.type) if not isinstance(columns[f.name], pa.Array)
                      else columns[f.name].cast(f.type) for f in TRAJECTORY_SCHEMA}, schema=TRAJECTORY_SCHEMA)
    validate_rows(table.slice(n_train - 50, 100).to_pylist(), f"bench round {round}")  # train and held-out rows fit
    return table


def write_archive(root: Path, rounds: int) -> int:
    """``rounds`` part files, one per round, written by the archive itself (its checks and its ledger included)."""
    archive, rows = Archive(root), 0
    for r in range(rounds):
        table = round_table(r)
        archive.append_round("bench", r, table)
        rows += table.num_rows
    return rows


def measure(root: Path, approach: str, n_groups: int) -> dict:
    """Run one draw in this process; what ``main`` reads from a subprocess."""
    archive = Archive(root)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if approach == "read":
        sample = archive.read()
    else:
        sample = draw_sample(archive, BacktestSettings(seed=SEED), n_groups=n_groups)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "rows": sample.num_rows, "sample_id": sample_id(sample),
            "groups": len(set(zip(sample["round"].to_pylist(), sample["group_id"].to_pylist()))),
            "peak_mb": peak / 1024, "above_imports_mb": (peak - before) / 1024,
            "arrow_peak_mb": pa.default_memory_pool().max_memory() / 2**20}


def _measure(root: Path, approach: str, n_groups: int) -> dict:
    done = subprocess.run([sys.executable, __file__, "--measure", approach, "--groups", str(n_groups),
                           "--root", str(root), "--no-record"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the {approach} measurement failed: {done.stderr.strip()[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = records.parser("bench_archive", __doc__)
    parser.add_argument("--rounds", type=records.positive, default=50,
                        help="rounds of 20,000 rows (50 -> 1,000,000)")
    parser.add_argument("--root", type=Path, help="archive folder to write (or reuse); default: a temporary one")
    parser.add_argument("--measure", choices=("read", "draw"), help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.root, args.measure, args.groups)))
        return
    if args.root is not None and args.root.exists() and not args.root.is_dir():
        records.refuse(f"--root {args.root} is a file: give a folder for the archive (or leave --root out)")
    load = records.load_now()
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        root = args.root or Path(tmp) / "archive"
        t0 = time.perf_counter()
        existing = sorted(root.glob("run_id=bench/round=*/part-*.parquet"))
        if len(existing) == args.rounds:
            rows = Archive(root).count()
            wrote = f"reused {rows:,} rows in {root}"
        else:
            rows = write_archive(root, args.rounds)
            size = sum(p.stat().st_size for p in root.rglob("*.parquet")) / 2**20
            wrote = (f"wrote {rows:,} rows in {args.rounds} part files ({size:.0f} MiB) "
                     f"in {time.perf_counter() - t0:.1f} s")
        print(wrote)
        cells = {("read", 0): _measure(root, "read", 0)}
        for n_groups in DRAWS:
            first, again = _measure(root, "draw", n_groups), _measure(root, "draw", n_groups)
            if first["sample_id"] != again["sample_id"]:
                raise SystemExit(f"draw_sample of {n_groups} groups gave two samples: {first} / {again}")
            cells["draw", n_groups] = first
    print(f"\ndraw_sample on {rows:,} archived rows; {os.cpu_count()} cores, load average "
          f"{records.load_now()} (shared machine: other jobs run too); one run per cell")
    header = (f"{'approach':<34}{'groups':>7}{'rows':>9}{'seconds':>9}{'peak RSS MiB':>14}{'above imports':>15}"
              f"{'arrow peak':>12}")
    print(header + "\n" + "-" * len(header))
    figures = {}
    for (approach, n_groups), r in cells.items():
        label = "Archive.read(): every row" if approach == "read" else "draw_sample: pushdown, chosen groups"
        print(f"{label:<34}{n_groups or '-':>7}{r['rows']:>9}{r['seconds']:>9.2f}{r['peak_mb']:>14.0f}"
              f"{r['above_imports_mb']:>15.0f}{r['arrow_peak_mb']:>12.0f}")
        figures[f"{approach} {n_groups} groups" if n_groups else "read all"] = {
            k: round(r[k], 3) for k in ("seconds", "peak_mb", "above_imports_mb", "arrow_peak_mb")} | {
            "rows": r["rows"]}
    print("the same sample from two draws of each size: yes")
    records.write(args, {"rows": rows, "rounds": args.rounds, "draws": list(DRAWS)}, figures, load)


if __name__ == "__main__":
    main()

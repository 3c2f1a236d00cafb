"""Benchmark: the slice census's cost (``meta_agent.slice_census``), step by step.

The census is the dead-slice check's evidence where the archive holds too few groups of a kind: the current policy
answers fresh val tasks of every entry in main's mix, rendered by main's templates in the sandboxed harness runtime,
scored by main's reward and verified by the domain.  It runs in the digest phase at most once a round, so its cost is
paid like a generation preview's (issue 44's goal: <= 60 s on 2 cores at the README's small size).  This times it on
held-out set 12j's off-exam-task mix (the seed's two kinds and leg_counting at weight 2), from the round the bench's
small size draws (one flat group of chain_sum and one of leg_counting): the census size comes from the Fisher bound
exactly as in a round (``census_size``), so the figure is the round's.  Per step: export, draw (the domain's
val tasks), sandbox_start, render, model_load, generate, score, sandbox_stop, verify; wall and this process's CPU
seconds (the sandbox's own CPU runs in the container, not counted), the load average before and after.

    .venv/bin/python bench/bench_census.py              # the base policy, seed 0, 2 repeats in one process
    .venv/bin/python bench/bench_census.py --repeats 1 --no-record
    .venv/bin/python bench/bench_census.py --scan       # also re-check every archived round: named nothing?

``--scan`` re-runs the dead-slice check on every round archived under ``--runs`` (default ``runs``, where runs and
the repair bench write theirs) with the harness.yaml of its run (seed-mix and control rounds: it must name nothing)
and prints how many it named.
"""

from __future__ import annotations

import glob
import os
import resource
import tempfile
import time
from pathlib import Path

import records
import yaml

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.generation_preview import GenerationPreview
from meta_agent.slice_census import census
from meta_agent.slice_checks import slice_check, slice_figures
from rl_backend.model import resolve_model
from sandboxes.docker import DockerSandbox

LEGS = {"name": "leg_counting", "weight": 2.0, "config": {}}
"""12j's off-exam-task entry (reasoning-gym's default difficulty at half the mix)."""


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _round_rows() -> list[dict]:
    """The bench's small round 0 of 12j: one flat, unsolved group of chain_sum and one of leg_counting."""
    rows = []
    for kind in ("chain_sum", "leg_counting"):
        for i in range(4):
            rows.append({"traj_id": f"{kind}-{i}", "split": "train", "group_id": f"{kind}-g0", "reward": 0.0,
                         "verified": 0.0, "data_source": f"reasoning_gym/{kind}", "prompt": "", "response": ""})
    return rows


def time_census(repeats: int, seed: int, workdir: Path) -> list[dict]:
    repo = HarnessRepo.create(workdir / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = [*config["tasks"], LEGS]
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "12j's mix")
    figures, level = slice_figures(_round_rows(), config["tasks"], MathDomain().eval_specs)
    preview = GenerationPreview(repo, MathDomain(), DockerSandbox(), resolve_model(None), workdir / "gp", seed=seed)
    out = []
    for r in range(repeats):  # the first pays the model load; a round's census is one call on a fresh preview
        cpu, wall = _cpu(), time.monotonic()
        rows, record = census(preview, "main", figures, level, seed=seed)
        record |= {"repeat": r, "wall_s": round(time.monotonic() - wall, 1), "cpu_s": round(_cpu() - cpu, 1),
                   "load": round(os.getloadavg()[0], 1)}
        check, _ = slice_check(_round_rows() + rows, config["tasks"], MathDomain().eval_specs)
        record["detail"] = check["detail"][:300]
        out.append(record)
        print(f"census {r}: {record['groups']} groups, {record['completions']} completions, {record['wall_s']} s "
              f"wall, {record['cpu_s']} s CPU, load {record['load']}; phases {record['phases']}", flush=True)
    return out


def scan(runs: Path) -> dict:
    import pyarrow.parquet as pq

    named, total = [], 0
    for part in sorted(glob.glob(str(runs / "**/archive/run_id=*/round=*/*.parquet"), recursive=True)):
        root = Path(part.split("/archive/")[0])
        try:
            tasks = yaml.safe_load((root / "harness" / "harness.yaml").read_text())["tasks"]
        except (OSError, KeyError, TypeError, yaml.YAMLError):
            continue
        rows = pq.read_table(part).to_pylist()
        if not rows or "data_source" not in rows[0]:
            continue
        total += 1
        _, found = slice_check(rows, tasks, MathDomain().eval_specs)
        if found:
            named.append(f"{part}: {found['message'][:160]}")
    print(f"scan: {total} archived rounds, {len(named)} named a dead slice", *named[:10], sep="\n  ")
    return {"rounds": total, "named": len(named)}


def main() -> None:
    parser = records.parser("bench_census", __doc__)
    parser.add_argument("--repeats", type=records.positive, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scan", action="store_true", help="also re-check the archived rounds under --runs")
    parser.add_argument("--runs", type=Path, default=Path("runs"),
                        help="the folder holding the runs whose archived rounds --scan re-checks (default: runs)")
    args = parser.parse_args()
    if args.scan and not args.runs.is_dir():
        records.refuse(f"--runs {args.runs} is not a folder; give the folder holding the runs' archives")
    load = records.load_now()
    with tempfile.TemporaryDirectory() as tmp:
        timed = time_census(args.repeats, args.seed, Path(tmp))
    figures: dict = {"census": [{k: v for k, v in t.items() if k != "detail"} for t in timed]}
    if args.scan:
        figures["scan"] = scan(args.runs)
    records.write(args, {"repeats": args.repeats, "seed": args.seed, "mix": "12j off-exam-task"}, figures, load)


if __name__ == "__main__":
    main()

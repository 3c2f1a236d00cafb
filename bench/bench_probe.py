"""Benchmark: the extra backtest time the probe session costs per candidate (goal: under 2 s on 2 cores).

The probe (``meta_agent.judge.probe``) starts one more sandboxed harness session per candidate,
renders twice a round's prompts over fresh tasks and scores up to ``MAX_STEPS`` steps of constructed
answers, then verifies them on the host.  This times ``probe_commit`` for the seed math harness with
its own knobs and with a larger round (the probe caps the scored steps), plus the container start
alone for reference.  Prints a table; not part of the tests.

    .venv/bin/python bench/bench_probe.py
    .venv/bin/python bench/bench_probe.py --repeats 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.domains.math import MathDomain
from meta_agent.judge.probe import ProbeContext, probe_commit
from sandboxes.base import Limits
from sandboxes.docker import DockerSandbox


def _timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sandbox, domain = DockerSandbox(), MathDomain()
    limits = Limits(timeout_s=300, memory_mb=1024, cpus=1.0, pids=64)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        repo = HarnessRepo.create(Path(tmp) / "harness", "math")
        seed_commit = repo.head("main")
        wt = repo.start_intervention(0, "big-round", worktree_root=Path(tmp) / "wt")
        config = yaml.safe_load((wt.path / "harness.yaml").read_text())
        config["grpo"].update(steps_per_round=20, prompts_per_step=8, group_size=8)
        for spec in config["tasks"]:  # 1-digit generators hold too few distinct questions for 320 tasks
            spec["config"].update(max_digits=3)
        (wt.path / "harness.yaml").write_text(yaml.safe_dump(config))
        repo.commit(wt, "bench: a larger round", {"Hypothesis": "bench"})
        repo.remove_worktree(wt)
        big_commit = repo.head(wt.branch)
        context = ProbeContext("bench", 1)
        for label, commit in (("seed knobs (3 steps x 4 x 4)", seed_commit),
                              ("20 steps x 8 x 8 (probe caps at 8 steps)", big_commit)):
            cfg = repo.config(commit)
            reports = []
            times = _timed(lambda: reports.append(probe_commit(repo, commit, sandbox, limits, 300.0, domain, cfg,
                                                               context)), args.repeats)
            rows.append((label, reports[-1].trajectories, statistics.median(times), max(times)))
        out = Path(tmp) / "out"
        start_only = _timed(lambda: sandbox.run(["true"], mounts=[], output_dir=out, limits=limits), args.repeats)
        rows.append(("container start + exit only", 0, statistics.median(start_only), max(start_only)))
    print(f"{'probe':45s} {'trajectories':>12s} {'median s':>9s} {'max s':>7s}")
    for label, n, med, worst in rows:
        print(f"{label:45s} {n:12d} {med:9.2f} {worst:7.2f}")


if __name__ == "__main__":
    main()

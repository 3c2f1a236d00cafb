"""Benchmark: backtest of 10,000 archived math trajectories (or ``--groups`` x 4, several sizes in one table).

Measures trajectories per second for the seed harness run by ``run_harness`` in
its sandboxed runtime (one long-lived container per commit, as the gate runs it:
render the sample's tasks, score batch by batch, filter, diagnose) versus the same
reward called in-process, and versus the runtime's whole pipeline run in-process
(render, reward, filters, diagnostics: everything but the sandbox and the wire),
the fixed cost of one container start and of the two sessions every run starts and
closes, and the host-side gate (paired bootstrap over groups).  Prints a table; not
part of the tests.

    .venv/bin/python bench/bench_backtest.py                  # 10,000 trajectories
    .venv/bin/python bench/bench_backtest.py --groups 250000  # 1M
    .venv/bin/python bench/bench_backtest.py --groups 2500 25000 62500 250000   # 10k to 1M, one table
"""

from __future__ import annotations

import importlib.util
import sys
import os
import resource
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent import gate
from meta_agent.backtest import SampleData, run_harness
from meta_agent.config import BacktestSettings, GateThresholds
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.base import Limits
from sandboxes.docker import DockerSandbox
from sandboxes.harness_client import HarnessSession, diagnose_memory_mb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import records  # noqa: E402  (bench/records.py: the record of a run, bad input refused on one line)

RANGE = (0.0, 1.0)


def main() -> None:
    parser = records.parser("bench_backtest", __doc__)
    parser.add_argument("--groups", type=records.positive, nargs="+", default=[2500],
                        help="GRPO groups of 4 (2500 -> 10,000 trajectories); several sizes: one column each")
    args = parser.parse_args()
    load_before = records.load_now()
    sandbox = DockerSandbox()
    columns = []
    for n_groups in sorted(args.groups):
        columns.append(measure(n_groups, sandbox))
        print(f"measured {n_groups * 4:,} trajectories", flush=True)
    names = list(dict.fromkeys(name for column in columns for name, _ in column))
    width = max(len(name) for name in names)
    load = os.getloadavg()[0]
    print(f"\nbacktest benchmark; {os.cpu_count()} cores, load average {load:.2f} at the end (other jobs share this "
          f"machine)\n")
    sizes = [f"{n * 4:,} trajectories" for n in sorted(args.groups)]
    print(f"| {'what'.ljust(width)} | " + " | ".join(sizes) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(s) + 2) for s in sizes) + "|")
    for name in names:
        cells = [dict(column).get(name, "") for column in columns]
        print(f"| {name.ljust(width)} | " + " | ".join(cells) + " |")
    records.write(args, config={"groups": sorted(args.groups), "group_size": 4},
                  figures={size: dict(column) for size, column in zip(sizes, columns)}, load_before=load_before)


def measure(n_groups: int, sandbox: DockerSandbox) -> list[tuple[str, str]]:
    """One column of the table: every figure for ``n_groups`` groups of 4."""
    rows_out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        archive = Archive(tmp_path / "archive")
        written = write_archive(archive, n_groups)
        table = archive.read()
        rows_out.append(("archive: generate + verify + write",
                         f"{time.perf_counter() - t0:.2f} s for {written} rows"))
        progress("archive written")

        repo = HarnessRepo.create(tmp_path / "harness", "math")
        commit = repo.head("main")
        sample = SampleData.of(table)
        del table  # the sample holds it
        views = sample.views
        progress("sample drawn")

        # in-process: the same reward file, imported here (benchmark only: never in the controller)
        spec = importlib.util.spec_from_file_location("seed_reward", repo.export(commit, tmp_path / "h") / "reward.py")
        reward = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(reward)
        t0, c0 = time.perf_counter(), time.process_time()
        for v in views:
            reward.compute_score(v["data_source"], v["response"], v["ground_truth"], extra_info={})
        in_process, in_process_cpu = time.perf_counter() - t0, time.process_time() - c0
        c0 = time.process_time()
        pipeline = in_process_pipeline(tmp_path / "h", sample)
        pipeline_cpu = time.process_time() - c0
        progress("in-process pipeline")

        # container fixed cost
        starts = []
        for _ in range(5):
            out = tmp_path / f"o{len(starts)}"
            out.mkdir()
            res = sandbox.run(["python3", "-c", "pass"], mounts=[], output_dir=out, limits=Limits(timeout_s=60))
            starts.append(res.duration_s)

        floors = [session_floor(sandbox, tmp_path / "h") for _ in range(3)]

        settings = BacktestSettings(timeout_s=600)
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_harness(repo, commit, sample, sandbox, tmp_path / "cache", settings, RANGE)
        sandboxed, host_cpu = time.perf_counter() - t0, time.process_time() - c0
        assert run.failure is None, run.failure
        progress("sandboxed run")
        t0 = time.perf_counter()
        assert run_harness(repo, commit, sample, sandbox, tmp_path / "cache", settings, RANGE).cached
        cached = time.perf_counter() - t0

        ids = [v["traj_id"] for v in views]
        groups = {g: i for i, g in enumerate(dict.fromkeys(v["group_id"] for v in views))}
        verified = np.array([r["verified"] >= 0.5 for r in sample.rows])
        gate_sample = gate.Sample(np.array([groups[v["group_id"]] for v in views]), verified)
        keep, error = np.array([run.results[t]["keep"] for t in ids]), np.zeros(len(ids), bool)
        main_arm = gate.Arm(np.array([run.results[t]["reward"] for t in ids], float), keep, error)
        # stands in for a candidate that also reads \boxed{}: it pays every verified success
        cand_arm = gate.Arm(np.where(verified, 1.0, main_arm.reward), keep, error)
        # the gate needs only its arrays: the sample and the run go first (its draws are 250,000 groups x 1000
        # resamples at 1M, several GB of their own)
        n, diagnose_limit, summary = len(views), diagnose_memory_mb(views), run.sandbox
        del run, sample, views, ids, groups
        progress("before the gate")
        t0 = time.perf_counter()
        result = gate.decide(main_arm, cand_arm, gate_sample, ["miss_rate decrease"], GateThresholds(),
                             reward_range=RANGE)
        gate_s = time.perf_counter() - t0
        progress("gate")

    rows_out += [
        ("in-process reward", f"{n / in_process:,.0f} traj/s ({in_process:.3f} s)"),
        ("in-process runtime pipeline (render, reward, filters, diagnose; no sandbox)",
         f"{n / pipeline:,.0f} traj/s ({pipeline:.2f} s)"),
        ("sandboxed run_harness (export, render every task, score batch by batch, diagnose in a session of its own)",
         f"{n / sandboxed:,.0f} traj/s ({sandboxed:.2f} s)"),
        ("sandboxed / in-process reward (wall)", f"{in_process / sandboxed:.3f}x"),
        ("sandboxed / in-process runtime pipeline (wall)", f"{pipeline / sandboxed:.3f}x"),
        ("CPU s of this process: in-process reward / in-process pipeline / sandboxed run (host side only)",
         f"{in_process_cpu:.2f} / {pipeline_cpu:.2f} / {host_cpu:.2f}"),
        ("CPU s of the sandboxed run: host + container (runtime and harness workers)",
         f"{host_cpu:.2f} + {summary.get('cpu_s') or float('nan'):.2f}"),
        ("in-process pipeline / sandboxed run (CPU s: the ratio a shared machine's load moves least)",
         f"{pipeline_cpu / (host_cpu + (summary.get('cpu_s') or float('nan'))):.3f}x"),
        ("sandbox sessions' life (start to close, summed)", f"{summary.get('duration_s', float('nan')):.2f} s"),
        ("container start+remove (python3 -c pass), median of 5", f"{statistics.median(starts):.2f} s"),
        ("sandbox floor: run_harness's two sessions started, one empty request each, closed; median of 3",
         f"{statistics.median(floors):.2f} s"),
        ("best sandboxed / in-process pipeline if the work in the sandbox took no time (pipeline / floor)",
         f"{pipeline / statistics.median(floors):.3f}x"),
        ("cached re-run (same commit, same sample)", f"{cached * 1000:.0f} ms"),
        (f"gate: {len(gate.GATE_METRICS)} metrics x {GateThresholds().bootstrap_samples} paired bootstraps",
         f"{gate_s:.2f} s (-> {result.decision})"),
        ("peak memory: diagnose session (its limit); this process so far (ru_maxrss)",
         f"{summary['session_peaks_mb'][-1] or float('nan'):,.0f} MB ({diagnose_limit:,} MB); "
         f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"),
    ]
    return rows_out


CHUNK_GROUPS = 25_000
"""Groups generated and written at a time, each chunk as an archived round of its own (round 0, 1, ...): the
rows of 1M trajectories held at once took most of this process's 16.6 GB peak.  Up to 25,000 groups (100,000
trajectories) the archive is one round, as in every record before chunking; larger samples span rounds."""


def write_archive(archive: Archive, n_groups: int) -> int:
    """Synthetic math rows of ``n_groups`` groups of 4 into ``archive``, a chunk at a time; the rows written."""
    written = 0
    for round_, start in enumerate(range(0, n_groups, CHUNK_GROUPS)):
        rows = synthetic_math_rows("bench", round_, min(CHUNK_GROUPS, n_groups - start), 4, seed=1,
                                   verify=MathDomain().verify)
        archive.append_round("bench", round_, rows)
        written += len(rows)
        del rows  # before the next chunk is generated
    return written


def progress(what: str) -> None:
    """A line on stdout with this process's memory now and at its peak (the stages that hold the most)."""
    now = next((int(line.split()[1]) // 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmRSS:")), -1)
    print(f"  {what}: RSS {now:,} MB, peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024:,} MB",
          flush=True)


def session_floor(sandbox: DockerSandbox, harness_dir: Path) -> float:
    """Seconds for what every ``run_harness`` pays before and after its work: two harness sessions started side by
    side (scoring and diagnose), each answering one empty request once its runtime is up, and closed."""
    def one() -> None:
        with HarnessSession(sandbox, harness_dir) as session:
            session.render([])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(one), pool.submit(one)]:
            done.result()
    return time.perf_counter() - t0


def in_process_pipeline(harness_dir: Path, sample: SampleData) -> float:
    """Seconds for the runtime's own pipeline on ``sample``, in this process (benchmark only)."""
    from sandboxes.harness_runtime import Diagnostics, Harness, Prompts

    t0 = time.perf_counter()
    harness, prompts = Harness(harness_dir), Prompts(harness_dir)
    for item in sample.render_items:
        prompts.render_one(item)
    annotated = []
    for batch in sample.batches:
        groups: dict[str, list[dict]] = {}
        for i in batch:
            groups.setdefault(sample.views[i]["group_id"], []).append(sample.views[i])
        for members in groups.values():
            for view, (reward, _, keep, _) in zip(members, harness.score_group(members)):
                annotated.append(view | {"reward": reward, "keep": keep})
    Diagnostics(harness_dir).diagnose(annotated)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()

"""Benchmark: the extra backtest time the probe session costs per candidate (goal: under 2 s on 2 cores).

The probe (``meta_agent.judge.probe``) starts one more sandboxed harness session per candidate,
renders twice a round's prompts over fresh tasks and scores up to ``MAX_STEPS`` steps of constructed
answers, verified on the host.  ``backtest_branch`` runs it beside the candidate's own sandbox run
(a thread), so what it adds to a backtest is the overlapped time minus the candidate's run alone.
This times, for the seed math harness on a synthetic archive sample (main's run cached, as for every
candidate after a round's first, so only the candidate's run hides the probe):

- the candidate's run alone, the probe alone, both one after the other (the old order) and both
  overlapped (the current order); extra = overlapped - candidate alone;
- the probe with a larger round (it caps the scored steps), the code seed's probe alone (its answers
  graded in the domain's grader) and a container start alone.

Prints a table; not part of the tests.

    .venv/bin/python bench/bench_probe.py
    .venv/bin/python bench/bench_probe.py --repeats 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.backtest import SampleData, draw_sample, run_harness, sandbox_limits
from meta_agent.config import BacktestSettings
from meta_agent.domains.code import CodeDomain
from meta_agent.domains.math import MathDomain
from meta_agent.judge.probe import ProbeContext, probe_commit
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
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
    settings = BacktestSettings(sample_groups=16)
    limits = sandbox_limits(settings)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        repo = HarnessRepo.create(Path(tmp) / "harness", "math")
        seed_commit = repo.head("main")
        archive = Archive(Path(tmp) / "archive")
        archive.append_round("b", 0, synthetic_math_rows("b", 0, 16, 4, seed=3, verify=domain.verify))
        sample = SampleData.of(draw_sample(archive, settings, n_groups=16))
        cfg = repo.config(seed_commit)
        context = ProbeContext.of(sample.rows)
        cache = Path(tmp) / "cache"

        def candidate() -> None:
            run_harness(repo, seed_commit, sample, sandbox, cache, settings, domain.reward_range, fresh=True)

        def probe(commit: str = seed_commit, config=cfg) -> None:
            probe_commit(repo, commit, sandbox, limits, settings.timeout_s, domain, config, context)

        def serial() -> None:
            probe()
            candidate()

        def overlapped() -> None:
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending = pool.submit(probe)
                candidate()
                pending.result()

        alone = _timed(candidate, args.repeats)
        rows.append(("candidate's run alone", alone))
        rows.append(("probe alone (seed knobs: 3 steps x 4 x 4)", _timed(probe, args.repeats)))
        rows.append(("probe, then candidate (old order)", _timed(serial, args.repeats)))
        both = _timed(overlapped, args.repeats)
        rows.append(("probe beside candidate (backtest_branch)", both))

        wt = repo.start_intervention(0, "big-round", worktree_root=Path(tmp) / "wt")
        config = yaml.safe_load((wt.path / "harness.yaml").read_text())
        config["grpo"].update(steps_per_round=20, prompts_per_step=8, group_size=8)
        for spec in config["tasks"]:  # 1-digit generators hold too few distinct questions for 320 tasks
            spec["config"].update(max_digits=3)
        (wt.path / "harness.yaml").write_text(yaml.safe_dump(config))
        repo.commit(wt, "bench: a larger round", {"Hypothesis": "bench"})
        repo.remove_worktree(wt)
        big = repo.head(wt.branch)
        rows.append(("probe alone, 20 steps x 8 x 8 (caps at 8 steps)",
                     _timed(lambda: probe(big, repo.config(big)), args.repeats)))
        code_repo = HarnessRepo.create(Path(tmp) / "code-harness", "code")
        code_commit = code_repo.head("main")

        def code_probe() -> None:  # a fresh grade cache each time: every program is graded again
            probe_commit(code_repo, code_commit, sandbox, limits, settings.timeout_s, CodeDomain(sandbox=sandbox),
                         code_repo.config(code_commit), context)

        rows.append(("code probe alone (seed knobs: 2 steps x 2 x 4, graded)", _timed(code_probe, args.repeats)))
        out = Path(tmp) / "out"
        rows.append(("container start + exit only",
                     _timed(lambda: sandbox.run(["true"], mounts=[], output_dir=out, limits=limits), args.repeats)))
    print(f"{'timing':56s} {'median s':>9s} {'max s':>7s}")
    for label, times in rows:
        print(f"{label:56s} {statistics.median(times):9.2f} {max(times):7.2f}")
    extra = [b - a for a, b in zip(alone, both)]
    print(f"{'extra per candidate (beside - alone, paired)':56s} {statistics.median(extra):9.2f} {max(extra):7.2f}")


if __name__ == "__main__":
    main()

"""Benchmark: one local SWE round (patch mode) split into phases, with grading timed on its own.

Runs the real loop on the seed SWE harness's default knobs (TRL on CPU with SmolLM2-135M, the
harness runtime and the backtests in Docker, the trusted grader in task containers, the recipe
agent) and prints one row per phase; inside ``train`` the time spent in trusted grading (training
patches and the held-out exam) is shown apart from generation and the optimizer steps.  Needs the
shipped tasks checked once (``python -m meta_agent tasks build --domain swe``).

    .venv/bin/python bench/bench_swe_round.py

The figures go to ``bench/results/bench_swe_round.jsonl`` (``--record FILE`` elsewhere, ``--no-record`` none).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import records
from domains.swe import SweDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.loop import Events, RoundLoop
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.local import LocalBackend
from sandboxes.docker import DockerSandbox


class TimedSweDomain(SweDomain):
    """The SWE domain, adding up the wall time of its trusted grading (one instance per process)."""

    graded = 0
    seconds = 0.0

    def verify_batch(self, items):
        started = time.perf_counter()
        try:
            return super().verify_batch(items)
        finally:
            TimedSweDomain.seconds += time.perf_counter() - started
            TimedSweDomain.graded += len(items)


def main() -> None:
    args = records.parser("bench_swe_round", __doc__).parse_args()
    load = records.load_now()
    times: dict[str, float] = {}
    current: dict = {"phase": None, "t": time.perf_counter()}

    def phase(n: int, name: str | None) -> None:
        now = time.perf_counter()
        if current["phase"] is not None:
            times[current["phase"]] = now - current["t"]
        current.update(phase=name, t=now)

    with tempfile.TemporaryDirectory() as tmp:
        rd = RunDir(Path(tmp) / "bench")
        rd.path.mkdir()
        repo = HarnessRepo.create(rd.harness, "swe")
        write_json_atomic(rd.run_json, {"run_id": "bench", "domain": "swe"})
        sandbox = DockerSandbox()
        loop = RoundLoop(run=rd, repo=repo, archive=Archive(rd.archive), backend=LocalBackend(sandbox=sandbox),
                         domain=TimedSweDomain(), agent=RecipeAgent(), sandbox=sandbox, run_id="bench",
                         events=Events(phase=phase, round_done=lambda s: phase(0, None)))
        knobs = repo.config().grpo
        started = time.perf_counter()
        loop.run_rounds(1)
        wall = time.perf_counter() - started
        n_rows = len(loop.archive.rows(run_id="bench", round=0))

    print(f"\nlocal SWE round, patch mode (seed knobs: {knobs.steps_per_round} steps x {knobs.prompts_per_step} "
          f"prompts x {knobs.group_size} completions, {knobs.max_completion_length} tokens; {n_rows} archived rows); "
          f"{wall:.0f} s in all\n")
    print(f"| {'phase':<34} | {'seconds':>8} | {'share':>6} |")
    print(f"| {'-' * 34} | {'-' * 8} | {'-' * 6} |")
    rows = [("train (all)", times.get("train", 0.0)),
            (f"  of which grading ({TimedSweDomain.graded} answers)", TimedSweDomain.seconds),
            ("  of which generation + TRL + exam", times.get("train", 0.0) - TimedSweDomain.seconds)]
    rows += [(name, times[name]) for name in ("archive", "diagnose", "digest", "propose", "backtest") if name in times]
    for name, seconds in rows:
        print(f"| {name:<34} | {seconds:>8.1f} | {seconds / wall:>6.1%} |")
    records.write(args, {"knobs": knobs.model_dump(), "rows": n_rows},
                  {"wall_s": round(wall, 1), "graded": TimedSweDomain.graded,
                   "phases_s": {name.strip(): round(seconds, 2) for name, seconds in rows}}, load)


if __name__ == "__main__":
    main()

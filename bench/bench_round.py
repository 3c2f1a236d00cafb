"""Benchmark: wall time per round, split into phases, and the controller's overhead.

Runs the real loop (TRL on CPU with SmolLM2-135M, Docker sandbox, recipe agent)
with the seed harness's default knobs, and prints one row per round and phase.
Overhead = everything but training, as a share of the round.  "train" includes the
round's sandboxed harness runtime; ``bench/bench_runtime.py`` isolates its cost.

    .venv/bin/python bench/bench_round.py --rounds 2

The figures go to ``bench/results/bench_round.jsonl`` (``--record FILE`` elsewhere, ``--no-record`` none).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path

import records
from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.loop import Events, RoundLoop
from meta_agent.names import get_domain
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.local import LocalBackend
from sandboxes.docker import DockerSandbox


def main() -> None:
    parser = records.parser("bench_round", __doc__)
    parser.add_argument("--rounds", type=records.positive, default=2)
    args = parser.parse_args()
    load = records.load_now()
    times: dict[int, dict[str, float]] = defaultdict(dict)
    current: dict = {"round": None, "phase": None, "t": time.perf_counter()}

    def phase(n: int, name: str) -> None:
        now = time.perf_counter()
        if current["phase"] is not None:
            times[current["round"]][current["phase"]] = now - current["t"]
        current.update(round=n, phase=name, t=now)

    def done(summary: dict) -> None:
        phase(summary["round"], None)

    with tempfile.TemporaryDirectory() as tmp:
        rd = RunDir(Path(tmp) / "bench")
        rd.path.mkdir()
        repo = HarnessRepo.create(rd.harness, "math")
        write_json_atomic(rd.run_json, {"run_id": "bench", "domain": "math"})
        sandbox = DockerSandbox()  # one engine client for the backend's harness runtime and the backtests
        loop = RoundLoop(run=rd, repo=repo, archive=Archive(rd.archive), backend=LocalBackend(sandbox=sandbox),
                         domain=get_domain("math"), agent=RecipeAgent(), sandbox=sandbox, run_id="bench",
                         events=Events(phase=phase, round_done=done))
        knobs = repo.config().grpo  # read before the temporary run folder goes away
        started = time.perf_counter()
        loop.run_rounds(args.rounds)
        wall = time.perf_counter() - started

    print(f"\nround timing (seed knobs: {knobs.steps_per_round} steps x {knobs.prompts_per_step} prompts x "
          f"{knobs.group_size} completions, {knobs.max_completion_length} tokens); {wall:.0f} s for "
          f"{args.rounds} rounds\n")
    names = ["train", "diagnose", "digest", "propose", "backtest"]
    print("| round | " + " | ".join(f"{n} s" for n in names) + " | total s | overhead share |")
    print("|---" * (len(names) + 3) + "|")
    for n, row in sorted(times.items()):
        total = sum(row.values())
        overhead = (total - row.get("train", 0.0)) / total if total else 0.0
        print(f"| {n} | " + " | ".join(f"{row.get(k, 0.0):.1f}" for k in names) + f" | {total:.1f} | {overhead:.0%} |")
    records.write(args, {"rounds": args.rounds, "knobs": knobs.model_dump()}, {
        "wall_s": round(wall, 1),
        "rounds": {str(n): {k: round(v, 2) for k, v in row.items()} for n, row in sorted(times.items())}}, load)


if __name__ == "__main__":
    main()

"""Benchmark: what the sandboxed harness runtime costs a local training round.

Since harness code never runs in a trusted process, the local backend opens one
``HarnessSession`` (a Docker container running ``sandboxes/harness_runtime/``) per
round, renders the round's candidate prompts once and scores each generation batch
through it.  This measures, with the math seed harness:

(a) a session's fixed cost: ``start()``, the first answer (Python and the harness
    importing in the container), ``close()``;
(b) ``score`` latency per generation batch of 8, 64 and 512 trajectories, against the
    same seed ``reward.py`` and ``filters.py`` imported and called here, in-process;
(c) ``render`` of 16 prompts, sandboxed and in-process;
(d) a local round's harness work with the seed knobs (one start + close, one render of
    16 candidate tasks, 4 scores of 8), sandboxed minus in-process, as a share of a
    measured round (goal: at most 5%), and the CPU an idle session burns meanwhile.

Importing harness files here is fine only because this is measurement code over the
seed; the controller never does it.  Prints one table; not part of the tests.

    .venv/bin/python bench/bench_runtime.py                  # about 2 minutes
    .venv/bin/python bench/bench_runtime.py --quick          # fewer repetitions, about 30 s
    .venv/bin/python bench/bench_runtime.py --round-seconds 128
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Callable, NamedTuple

import records
from domains.math import MathDomain
from rl_backend.local import BATCH_TIMEOUT_S, RUNTIME_LIMITS
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.docker import DockerSandbox
from sandboxes.harness_client import HarnessSession, trajectory_view
from sandboxes.harness_runtime import Harness, Prompts

SEED = Path(__file__).resolve().parent.parent / "harness_repo" / "seeds" / "math"
RANGE = (0.0, 1.0)
BATCH_SIZES = (8, 64, 512)
GROUP_SIZE = 4


class Reps(NamedTuple):
    sessions: int
    score: dict[int, int]
    render: int
    rounds: int
    idle_s: float


FULL = Reps(sessions=10, score={8: 50, 64: 30, 512: 10}, render=20, rounds=6, idle_s=10.0)
QUICK = Reps(sessions=3, score={8: 10, 64: 5, 512: 3}, render=5, rounds=2, idle_s=3.0)


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class InProcess:
    """The seed's reward and filters called directly, as a trusted process would (no copies, no transport)."""

    def __init__(self, root: Path) -> None:
        self.reward = load(root / "reward.py", "bench_seed_reward")
        self.filters = load(root / "filters.py", "bench_seed_filters")

    def score(self, views: list[dict]) -> list[tuple[float, bool]]:
        rewards = [self.reward.compute_score(v["data_source"], v["response"], v["ground_truth"],
                                             extra_info=v["extra_info"])["score"] for v in views]
        annotated = [v | {"reward": r} for v, r in zip(views, rewards)]
        keep = [self.filters.keep_trajectory(v) for v in annotated]
        groups: dict[str, list[int]] = {}
        for i, v in enumerate(annotated):
            groups.setdefault(v["group_id"], []).append(i)
        for members in groups.values():
            if not self.filters.keep_group([annotated[i] | {"keep": keep[i]} for i in members]):
                for i in members:
                    keep[i] = False
        return list(zip(rewards, keep))


def median_s(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of ``fn`` over ``reps`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def median_in_process(fn: Callable[[], object], reps: int) -> float:
    """Like ``median_s``, but each timing loops until it lasts 10 ms (single calls take microseconds)."""
    fn()
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - t0 > 0.01:
            break
        loops *= 2
    times = []
    for _ in range(max(reps, 5)):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t0) / loops)
    return statistics.median(times)


def views_of(rows: list[dict]) -> list[dict]:
    return [trajectory_view(r) for r in rows]


def session(sandbox: DockerSandbox) -> HarnessSession:
    """A session exactly as the local backend opens one (its limits and batch timeout)."""
    return HarnessSession(sandbox, SEED, limits=RUNTIME_LIMITS, request_timeout_s=BATCH_TIMEOUT_S)


def session_costs(sandbox: DockerSandbox, probe: list[dict], reps: int) -> tuple[float, float, float]:
    """Medians of start(), the first answer (a score of one view) and close()."""
    starts, firsts, closes = [], [], []
    for _ in range(reps):
        s = session(sandbox)
        t0 = time.perf_counter()
        s.start()
        t1 = time.perf_counter()
        s.score(probe, reward_range=RANGE)
        t2 = time.perf_counter()
        s.close()
        t3 = time.perf_counter()
        starts.append(t1 - t0)
        firsts.append(t2 - t1)
        closes.append(t3 - t2)
    return statistics.median(starts), statistics.median(firsts), statistics.median(closes)


def simulated_round(sandbox: DockerSandbox, items: list[dict], steps: list[list[dict]]) -> float:
    """A local round's harness calls with the seed knobs: start, render the candidates, score each step, close."""
    t0 = time.perf_counter()
    with session(sandbox) as s:
        prompts = s.render(items)
        assert all(isinstance(p, list) for p in prompts), prompts
        for views in steps:
            s.score(views, reward_range=RANGE)
    return time.perf_counter() - t0


def container_cpu_s(s: HarnessSession) -> float:
    # Private handle, but this is measurement code: the container's own cgroup CPU counter.
    stats = s._process.container.stats(stream=False, one_shot=True)  # type: ignore[union-attr]
    return stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9


def idle_cpu(sandbox: DockerSandbox, probe: list[dict], seconds: float) -> tuple[float, float]:
    """CPU per wall second of a started, idle session: in the container (the runtime's poll loop)
    and in this process (the sandbox's watchdog thread).  The engine answering the watchdog's
    stats calls is left out: other jobs share it, so its share cannot be told apart here."""
    with session(sandbox) as s:
        s.score(probe, reward_range=RANGE)  # the runtime is up and polling
        c0, h0 = container_cpu_s(s), time.process_time()
        time.sleep(seconds)
        c1, h1 = container_cpu_s(s), time.process_time()
    return (c1 - c0) / seconds, (h1 - h0) / seconds


def main() -> None:
    parser = records.parser("bench_runtime", __doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (about 30 s)")
    parser.add_argument("--round-seconds", type=float, default=128.0,
                        help="measured wall time of a local round (round 0 of bench/bench_round.py on the "
                             "2-core dev machine: ~128 s)")
    args = parser.parse_args()
    reps = QUICK if args.quick else FULL
    load_before = os.getloadavg()
    sandbox = DockerSandbox()
    local = InProcess(SEED)
    runtime_here = Harness(SEED)  # the runtime's own code, in-process: separates its copying from transport
    prompts_here = Prompts(SEED)

    rows = synthetic_math_rows("bench", 0, max(BATCH_SIZES) // GROUP_SIZE, GROUP_SIZE, seed=1,
                               verify=MathDomain().verify)
    views = {n: views_of(rows[:n]) for n in BATCH_SIZES}
    items, seen = [], set()
    # 16 distinct tasks: one round's render
    for r in synthetic_math_rows("bench", 1, 16, 1, seed=2, verify=MathDomain().verify):
        if r["task_id"] not in seen:
            seen.add(r["task_id"])
            task = json.loads(r["task"])
            items.append({"question": task["question"], "task": task["vars"]})
    assert len(items) == 16
    per_step = 2 * GROUP_SIZE  # prompts_per_step 2 x group_size 4
    steps = [views[512][i * per_step:(i + 1) * per_step] for i in range(4)]
    probe = views[8][:1]

    table: list[tuple[str, str, str, str]] = []

    start_s, first_s, close_s = session_costs(sandbox, probe, reps.sessions)
    total = start_s + first_s + close_s
    table += [
        (f"(a) session start() (container created + started), median of {reps.sessions}",
         f"{start_s * 1000:.0f} ms", "-", ""),
        ("(a) first answer (python + harness import in the container)", f"{first_s * 1000:.0f} ms", "-", ""),
        ("(a) close() (stop + remove)", f"{close_s * 1000:.0f} ms", "-", ""),
        ("(a) start + first answer + close", f"{total * 1000:.0f} ms", "0 ms", f"+{total * 1000:.0f} ms"),
    ]

    with session(sandbox) as s:
        s.score(probe, reward_range=RANGE)
        for n in BATCH_SIZES:
            batch = views[n]
            boxed = median_s(lambda: s.score(batch, reward_range=RANGE), reps.score[n])
            direct = median_in_process(lambda: local.score(batch), reps.score[n])
            copied = median_in_process(lambda: _score_in_process(runtime_here, batch), reps.score[n])
            table.append((f"(b) score {n} trajectories, median of {reps.score[n]} (traj/s)",
                          f"{boxed * 1000:.1f} ms ({n / boxed:,.0f}/s)",
                          f"{direct * 1000:.2f} ms ({n / direct:,.0f}/s)",
                          f"+{(boxed - direct) * 1000:.1f} ms; runtime code in-process {copied * 1000:.2f} ms"))
        render_boxed = median_s(lambda: s.render(items), reps.render)
        render_direct = median_in_process(lambda: [prompts_here.render_one(i) for i in items], reps.render)
        table.append((f"(c) render 16 prompts, median of {reps.render}", f"{render_boxed * 1000:.1f} ms",
                      f"{render_direct * 1000:.2f} ms", f"+{(render_boxed - render_direct) * 1000:.1f} ms"))

    round_boxed = statistics.median(simulated_round(sandbox, items, steps) for _ in range(reps.rounds))

    def round_in_process() -> None:
        [Prompts(SEED).render_one(i) for i in items]  # fresh templates parses its templates, as a round would
        for v in steps:
            local.score(v)

    round_direct = median_in_process(round_in_process, reps.rounds)
    overhead = round_boxed - round_direct
    share = overhead / args.round_seconds
    table.append((f"(d) round's harness work (start, render 16, 4 x score 8, close), median of {reps.rounds}",
                  f"{round_boxed * 1000:.0f} ms", f"{round_direct * 1000:.1f} ms", f"+{overhead * 1000:.0f} ms"))
    table.append((f"(d) sandbox overhead per round / {args.round_seconds:.0f} s round (goal <= 5%)",
                  f"{share:.2%}", "", "within goal" if share <= 0.05 else "OVER GOAL"))

    in_box, host = idle_cpu(sandbox, probe, reps.idle_s)
    background = (in_box + host) * args.round_seconds
    cores = os.cpu_count() or 1
    table.append((f"(d) idle session CPU per wall s ({reps.idle_s:.0f} s window, engine not counted)",
                  f"runtime poll {in_box:.1%} + host watchdog {host:.1%} of a core", "0", ""))
    table.append((f"(d) + that CPU over the round / ({cores} cores x {args.round_seconds:.0f} s)",
                  f"{background:.1f} core-s = {background / (cores * args.round_seconds):.2%} of the machine",
                  "", "wall share + CPU share = "
                  f"{share + background / (cores * args.round_seconds):.2%}"))

    load_after = os.getloadavg()
    header = ("what", "sandboxed", "in-process", "sandbox adds")
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(4)]
    print(f"\nharness runtime benchmark: math seed, {'quick' if args.quick else 'full'} repetitions; "
          f"{cores} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          f"(other jobs share this machine)\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
    records.write(args, {"quick": args.quick, "round_seconds": args.round_seconds},
                  {r[0]: dict(zip(("sandboxed", "in_process", "sandbox_adds"), r[1:])) for r in table},
                  "{:.1f} {:.1f} {:.1f}".format(*load_before))


def _score_in_process(harness: Harness, batch: list[dict]) -> list:
    """The runtime's scoring of one batch, group by group as its worker does, without the sandbox."""
    groups: dict[str, list[dict]] = {}
    for view in batch:
        groups.setdefault(view["group_id"], []).append(view)
    return [harness.score_group(members) for members in groups.values()]


if __name__ == "__main__":
    main()

"""Figures of the verl backend that run on CPU: dump ingest, reward-entry throughput, config generation.

    .venv-verl/bin/python bench/bench_verl.py                # 1M-row ingest, 200 rewards, 5 validations
    .venv-verl/bin/python bench/bench_verl.py --rows 200000 --rewards 50

1. ingest: a dump of ``--rows`` trajectories written in verl 0.9.1's V1 format (100 step files,
   groups of 8, uid ``{prompt_uuid}_{session}_{output}``, a padding row per step) imported into a
   fresh archive by ``rl_backend.verl.ingest`` in a child process; rows/s of wall and of CPU time
   (Arrow's JSON reader may use a second thread), and the child's peak RSS.
2. reward entry: trajectories/s of ``reward_entry.score_one`` (seed math harness in the Docker
   sandbox, one worker, verifier on the host), one call at a time, and of verl's own entry, the async
   ``compute_score``, with 50x as many calls in flight as verl's reward loop awaits them (its record
   line written per call), next to calling the same harness reward in-process.
3. verl's own reward loop: one ``RewardLoopWorker`` (verl 0.9.1's class, made here without Ray) scoring a
   ``DataProto`` of ``--loop-rows`` rows with ``compute_score_batch``, as the trainer's reward loop calls each
   worker: a task per row, the row sliced out, its response decoded, the reward awaited.  Once with a reward
   that does nothing (verl's own ceiling per reward worker) and once with this project's entry (sandboxed harness
   reward, verifier, record line), so the entry's share of a reward worker's time shows.
4. config: seconds to generate a round's overrides and to validate them with verl's Hydra config
   and validators (the first validation imports verl and composes from cold).
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import records  # noqa: E402

STEPS = 100
GROUP = 8


def write_dump(folder: Path, rows: int) -> int:
    """``rows`` trajectories over ``STEPS`` files, plus one padding row per file; the trajectory count."""
    folder.mkdir(parents=True)
    per_step = rows // STEPS
    for step in range(1, STEPS + 1):
        with (folder / f"{step}.jsonl").open("w", encoding="utf-8") as f:
            for g in range(per_step // GROUP):
                prompt = uuid.uuid4()
                question = f"What is {g} + {step}?"
                for s in range(GROUP):
                    f.write(json.dumps({"input": f"user\n{question}\nassistant\n", "output": f"{g} + {step} = "
                                        f"{g + step + s % 2}\nAnswer: {g + step + s % 2}", "gts": json.dumps(
                                            {"answer": str(g + step)}), "score": float(s % 2 == 0), "step": step,
                                        "uid": f"{prompt}_{s}_0"}, ensure_ascii=False) + "\n")
            f.write(json.dumps({"input": "", "output": "", "gts": "{}", "score": 0.0, "step": step,
                                "uid": f"pad{uuid.uuid4().hex}_0_0"}) + "\n")
    return STEPS * (per_step // GROUP) * GROUP


CHILD = """
import resource, sys, time
from pathlib import Path
from rl_backend.archive import Archive
from rl_backend.verl.ingest import import_verl_dump
started, cpu = time.perf_counter(), time.process_time()
n = import_verl_dump(Path(sys.argv[1]), Archive(Path(sys.argv[2])), "bench", 0, domain="math", split="train")
print(n, time.perf_counter() - started, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_ingest(rows: int) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "rollouts"
        n = write_dump(dump, rows)
        size = sum(p.stat().st_size for p in dump.iterdir()) / 2**20
        out = subprocess.run([sys.executable, "-c", CHILD, str(dump), str(Path(tmp) / "archive")], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
        imported, seconds, cpu, peak_kb = int(out[0]), float(out[1]), float(out[2]), int(out[3])
    assert imported == n, (imported, n)
    return [("ingest trajectories", f"{n:,} ({size:.0f} MiB of JSONL, {STEPS} step files)"),
            ("ingest rows/s", f"{n / seconds:,.0f} ({seconds:.1f} s)"),
            ("ingest rows per CPU second", f"{n / cpu:,.0f} ({cpu:.1f} s of CPU; the figure a shared machine's "
             "load does not move)"),
            ("ingest peak RSS", f"{peak_kb / 1024:.0f} MiB")]


def bench_reward(n: int) -> list[tuple[str, str]]:
    import importlib.util

    from rl_backend.verl import reward_entry

    seed = REPO / "harness_repo" / "seeds" / "math"
    gold = json.dumps({"answer": "7"})
    responses = [f"3 + 4 = {7 + i % 2}\nAnswer: {7 + i % 2}" for i in range(n)]
    kwargs = dict(harness_dir=str(seed), domain_ref="domains.math:MathDomain")
    extra = {"task_id": "chain_sum-1", "split": "train", "prompt": "3 + 4?"}
    reward_entry.score_one("reasoning_gym/chain_sum", "warm up", gold, extra, **kwargs)  # starts the sandbox
    started = time.perf_counter()
    for r in responses:
        record = reward_entry.score_one("reasoning_gym/chain_sum", r, gold, extra, **kwargs)
        assert record["error"] is None, record
    sandboxed = n / (time.perf_counter() - started)
    reward_entry.close_sessions()
    batched_n = n * 50

    with tempfile.TemporaryDirectory() as records_dir:
        async def in_flight() -> list[dict]:  # as verl's reward loop awaits compute_score: all of a batch at once
            return await asyncio.gather(*[reward_entry.compute_score(
                "reasoning_gym/chain_sum", responses[i % n], gold, extra, records_dir=records_dir, **kwargs)
                for i in range(batched_n)])

        asyncio.run(in_flight())  # starts the sandbox
        started = time.perf_counter()
        scores = asyncio.run(in_flight())
        batched = batched_n / (time.perf_counter() - started)
        reward_entry.close_sessions()
        assert all(s["harness_error"] == 0.0 for s in scores), scores[:3]
        written = sum(len(p.read_text().splitlines()) for p in Path(records_dir).glob("*.jsonl"))
        assert written == 2 * batched_n, written  # a record per call, beside the score
    spec = importlib.util.spec_from_file_location("seed_reward", seed / "reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from domains.math import verify

    started = time.perf_counter()
    for r in responses:
        module.compute_score("reasoning_gym/chain_sum", r, {"answer": "7"}, extra_info=extra)
        verify("reasoning_gym/chain_sum", r, {"answer": "7"})
    in_process = n / (time.perf_counter() - started)
    return [("reward entry, sandboxed (1 worker), one call at a time", f"{sandboxed:,.0f} trajectories/s ({n} calls)"),
            ("reward entry, sandboxed (1 worker), calls in flight batched",
             f"{batched:,.0f} trajectories/s ({batched_n} compute_score calls in flight: verifier and records "
             "included)"),
            ("harness reward in-process + verifier", f"{in_process:,.0f} trajectories/s (not allowed in training)")]


NOOP_REWARD = """
async def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": 0.0, "keep": 1.0, "verified": 0.0, "harness_error": 0.0}
"""


def bench_reward_loop(n: int) -> list[tuple[str, str]]:
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from harness_repo.contract import GRPOKnobs
    from rl_backend.model import resolve_model
    from rl_backend.verl import reward_entry
    from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides
    from rl_backend.verl.validate import compose

    model = resolve_model(None)
    tokenizer = AutoTokenizer.from_pretrained(model)

    def rows(count: int) -> DataProto:  # what the rollout hands the reward loop: right-padded response ids
        ids = [tokenizer(f"3 + 4 = {7 + i % 2}\nAnswer: {7 + i % 2}", add_special_tokens=False)["input_ids"]
               for i in range(count)]
        width, prompt = max(map(len, ids)), 3
        return DataProto.from_dict(
            tensors={"prompts": torch.zeros(count, prompt, dtype=torch.long),
                     "responses": torch.tensor([x + [0] * (width - len(x)) for x in ids]),
                     "attention_mask": torch.tensor([[1] * (prompt + len(x)) + [0] * (width - len(x)) for x in ids])},
            non_tensors={"data_source": np.array(["reasoning_gym/chain_sum"] * count, dtype=object),
                         "reward_model": np.array([{"ground_truth": json.dumps({"answer": "7"}), "style": "rule"}]
                                                  * count, dtype=object),
                         "extra_info": np.array([{"task_id": "chain_sum-1", "split": "train", "prompt": "3 + 4?"}
                                                 for _ in range(count)], dtype=object)})

    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "noop.py").write_text(NOOP_REWARD)
        plan = RoundPlan.for_round(Path(tmp) / "round", 1)
        ovr = build_overrides(GRPOKnobs(), LaunchOptions(), plan, model_path=model, harness_dir=REPO / "harness_repo"
                              / "seeds" / "math", domain_ref="domains.math:MathDomain", run_id="b", round=0)
        for name, extra in (("noop", [f"reward.custom_reward_function.path={Path(tmp) / 'noop.py'}"]), ("entry", [])):
            asyncio.set_event_loop(asyncio.new_event_loop())  # the worker keeps the loop current when it is made
            worker = RewardLoopWorker(compose(ovr + extra))
            data = rows(n)
            worker.loop.run_until_complete(worker.compute_score_batch(rows(64)))  # warm: starts the sandbox
            started = time.perf_counter()
            out = worker.loop.run_until_complete(worker.compute_score_batch(data))
            rates[name] = n / (time.perf_counter() - started)
            reward_entry.close_sessions()
            worker.loop.close()
            assert len(out) == n and all(o["reward_extra_info"]["harness_error"] == 0.0 for o in out), out[:2]
            if name == "entry":
                assert [o["reward_score"] for o in out[:4]] == [1.0, 0.0, 1.0, 0.0], out[:4]
    share = 1 - rates["entry"] / rates["noop"]
    return [("verl reward loop worker, reward doing nothing", f"{rates['noop']:,.0f} trajectories/s ({n} rows in "
             "one compute_score_batch: verl 0.9.1's ceiling per reward worker)"),
            ("verl reward loop worker, this entry", f"{rates['entry']:,.0f} trajectories/s ({share:.0%} of the "
             "worker's time is the entry's)")]


def bench_config(repeats: int) -> list[tuple[str, str]]:
    from harness_repo.contract import GRPOKnobs
    from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides
    from rl_backend.verl.validate import validate_overrides

    with tempfile.TemporaryDirectory() as tmp:
        plan = RoundPlan.for_round(Path(tmp), 1)
        started = time.perf_counter()
        for _ in range(1000):
            ovr = build_overrides(GRPOKnobs(), LaunchOptions(gpus=8), plan, model_path="/m", harness_dir=Path(tmp),
                                  domain_ref="domains.math:MathDomain", run_id="b", round=0)
        generate_ms = (time.perf_counter() - started)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            result = validate_overrides(ovr, creates=(plan.launch_dir,))
            times.append(time.perf_counter() - started)
            assert result.ok, result.problems
    warm = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
    return [("generate overrides", f"{generate_ms:.3f} ms each ({len(ovr)} overrides)"),
            ("validate, first (cold import + compose)", f"{times[0]:.1f} s"),
            ("validate, warm (median)", f"{warm:.2f} s")]


def main() -> None:
    parser = records.parser("bench_verl", __doc__)
    parser.add_argument("--rows", type=records.positive, default=1_000_000)
    parser.add_argument("--rewards", type=records.positive, default=200)
    parser.add_argument("--loop-rows", type=records.positive, default=4096)
    parser.add_argument("--validations", type=records.positive, default=5)
    args = parser.parse_args()
    if args.rows < STEPS * GROUP:
        records.refuse(f"--rows {args.rows}: the dump spreads groups of {GROUP} over {STEPS} steps, "
                       f"so give at least {STEPS * GROUP}")
    load_before = records.load_now()
    rows = (bench_ingest(args.rows) + bench_reward(args.rewards) + bench_reward_loop(args.loop_rows)
            + bench_config(args.validations))
    load = open("/proc/loadavg").read().split()[0]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value   (load average at the end: {load})")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB")
    records.write(args, {k: getattr(args, k) for k in ("rows", "rewards", "loop_rows", "validations")},
                  {"measures": dict(rows), "peak_mb": round(peak)}, load_before)


if __name__ == "__main__":
    main()

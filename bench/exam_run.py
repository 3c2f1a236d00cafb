"""Benchmark: a finished run's saved policies, one per round, on today's trusted exam, paired with the base.

A run's own exam figures use the exam of the code it ran with.  This sits the untrained base
policy and every round's saved policy (``rounds/<n>/train/policy``) on the exam the current
code defines (``MathDomain.eval_specs``, ``EvaluationSettings``), through the local backend's
own exam code, and prints each round's accuracy with its exact 95% interval and its paired
change from the base policy.  Training is not repeated: what changes is only the measuring stick.

    .venv/bin/python bench/exam_run.py --run-dir runs/math-20261123
    .venv/bin/python bench/exam_run.py --run-dir runs/m1 --heldout-size 256
"""

from __future__ import annotations

import time
from pathlib import Path

import records
import rl_backend.local as local  # first: sets OpenMP's wait policy before torch loads
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from meta_agent.config import EvaluationSettings
from meta_agent.heldout_stats import accuracy, format_interval, outcomes_by_task, paired_difference
from rl_backend.base import RoundSpec
from rl_backend.model import resolve_model

MATH = "domains.math:MathDomain"


def exam(policy: Path, out: Path, settings: EvaluationSettings) -> tuple[dict[str, float], float]:
    """``{task_id: 0/1}`` of ``policy`` on the trusted exam, and the seconds it took."""
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
    spec = RoundSpec(run_id="exam", round=0, harness_dir=out, harness_commit="-", policy_in=str(policy),
                     out_dir=out, domain=MATH, **settings.model_dump())
    started = time.monotonic()
    rows = local.heldout_eval(spec, model, tokenizer, str(policy), 0)
    return outcomes_by_task(rows), time.monotonic() - started


def main() -> None:
    parser = records.parser("exam_run", __doc__)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--heldout-size", type=records.positive, default=EvaluationSettings().heldout_size)
    args = parser.parse_args()
    if not args.run_dir.is_dir():
        records.refuse(f"--run-dir {args.run_dir} is not a folder: give a finished local run's folder")
    settings = EvaluationSettings(heldout_size=args.heldout_size)
    policies = sorted(args.run_dir.glob("rounds/*/train/policy"), key=lambda p: int(p.parts[-3]))
    if not policies:
        records.refuse(f"{args.run_dir} has no rounds/<n>/train/policy folder: give a finished local run's folder "
                       "(runs started with --keep-policies keep them)")
    load = records.load_now()
    out = args.run_dir / "exam_run"
    out.mkdir(exist_ok=True)
    base, seconds = exam(resolve_model(None), out, settings)
    acc = accuracy(list(base.values()))
    figures: dict = {"exam_n": len(base), "correct": {"base": sum(base.values())}, "vs_base": {}}
    print(f"| policy | accuracy (95%) | vs base (paired) | gained / lost | exam s |\n|---|---|---|---|---|\n"
          f"| base | {format_interval(acc.value, acc.low, acc.high)} | | | {seconds:.0f} |")
    for policy in policies:
        outcomes, seconds = exam(policy, out, settings)
        acc, d = accuracy(list(outcomes.values())), paired_difference(base, outcomes)
        print(f"| round {policy.parts[-3]} | {format_interval(acc.value, acc.low, acc.high)} | "
              f"{format_interval(d.value, d.low, d.high, signed=True)}{' *' if d.excludes_zero else ''} | "
              f"+{d.gained} / -{d.lost} | {seconds:.0f} |")
        figures["correct"][policy.parts[-3]] = sum(outcomes.values())
        figures["vs_base"][policy.parts[-3]] = {"gained": d.gained, "lost": d.lost}
    print(f"\n{len(base)} distinct held-out tasks; * the interval excludes zero")
    records.write(args, {"run_dir": str(args.run_dir), "heldout_size": args.heldout_size}, figures, load)


if __name__ == "__main__":
    main()

"""How far a round moves the policy, as the exam sees it: two real local rounds per arm, exam answers compared.

Each arm is the math seed with knobs overridden; round 0 trains from the base model, round 1 from round 0's policy,
each followed by the greedy exam on the same held-out draw.  It prints, per arm, how many exam answers round 1
left word for word as round 0's and how many verdicts flipped (round 0 against the base policy: verdicts only, the
run records no base text), and writes every arm's exam rows, the base verdicts and round 1's trainer metrics to
``--out`` (``tests/data/stall_exams.json`` is one such file: the evidence ``tests/test_stall.py`` judges).

    .venv/bin/python bench/bench_stall.py --arm trained '{}' --arm stalled '{"learning_rate": 1e-9}' \\
        --out /tmp/stall_exams.json        # 2 steps of 4x4, 48 exam tasks: about 10 min an arm on 2 loaded cores
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from meta_agent.stall_checks import exam_movement
from rl_backend.base import RoundSpec
from rl_backend.local import LocalBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))
import records  # noqa: E402  (bench/records.py: bad input refused on one line)

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
SIZE = {"steps_per_round": 2, "prompts_per_step": 4, "group_size": 4}
EXAM_KEYS = ("task_id", "response", "verified")


def run_arm(name: str, knobs: dict, work: Path, heldout: int) -> dict:
    """Two rounds of the seed with ``knobs``; the record ``tests/test_stall.py`` reads."""
    harness = work / f"harness-{name}"
    shutil.copytree(SEED, harness)
    config = yaml.safe_load((harness / "harness.yaml").read_text())
    config["grpo"].update({**SIZE, **knobs})
    (harness / "harness.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    policy, out = None, {"knobs": config["grpo"]}
    for r in (0, 1):
        started = time.monotonic()
        spec = RoundSpec(run_id=name, round=r, harness_dir=harness, harness_commit=name, policy_in=policy,
                         out_dir=work / name / str(r) / "train", domain="domains.math:MathDomain", seed=r,
                         heldout_size=heldout, heldout_seed=0)
        result = LocalBackend().train_round(spec)
        policy = result.policy_ref
        exam = [{k: row[k] for k in EXAM_KEYS} for row in result.heldout]
        if r == 0:
            out["base_outcomes"], out["round0_heldout"] = result.eval.get("base_outcomes"), exam
        else:
            out["round1"] = {"heldout": exam, "metrics": result.metrics}
        print(f"{name} round {r}: exam {result.eval.get('heldout_accuracy'):.3f}, "
              f"{time.monotonic() - started:.0f} s", flush=True)
    return out


def main() -> None:
    ap = records.BenchParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arm", nargs=2, action="append", metavar=("NAME", "KNOBS_JSON"), required=True)
    ap.add_argument("--heldout", type=records.positive, default=48)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    arms = {}
    for name, knobs in args.arm:  # every arm's knobs read before any training starts
        try:
            arms[name] = json.loads(knobs)
        except json.JSONDecodeError as exc:
            ap.error(f"--arm {name}: {knobs!r} is not JSON ({exc.msg}); give the knobs as a JSON object, "
                     "e.g. '{\"learning_rate\": 1e-9}'")
        if not isinstance(arms[name], dict):
            ap.error(f"--arm {name}: {knobs!r} is not a JSON object of knobs, e.g. '{{}}' for the seed's")
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, knobs in arms.items():
            record[name] = run_arm(name, knobs, Path(tmp), args.heldout)
    args.out.write_text(json.dumps(record, default=str))
    print("| arm | knobs | round 0 vs base: verdicts flipped | round 1 vs round 0: answers unchanged | flipped |")
    print("|---|---|---|---|---|")
    for name, run in record.items():
        first = exam_movement(run["round0_heldout"], run["base_outcomes"])
        second = exam_movement(run["round1"]["heldout"], run["round0_heldout"])
        print(f"| {name} | {json.dumps({k: run['knobs'][k] for k in ('learning_rate', 'beta')})} | "
              f"{first.tasks - first.same_verdict} of {first.tasks} | {second.same_text} of {second.tasks} | "
              f"{second.tasks - second.same_verdict} |")


if __name__ == "__main__":
    main()

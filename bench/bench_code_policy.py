"""How many code tasks the untrained local policy solves: greedy answers to the trusted exam prompt, graded.

    .venv/bin/python bench/bench_code_policy.py [--train 22] [--heldout 27] [--humaneval 40] [--max-tokens 128]
        [--samples N] [--temperature T] [--model-path rounds/2/policy]

Draws ``--train`` tasks of the seed harness's mix (CodeI/O, reference of at most 4 lines), the CodeI/O
held-out split and HumanEval, answers each greedily with the base model (SmolLM2-135M-Instruct unless
``--model-path``), grades them in containers and prints, per set, solved / asked (pass@1, greedy) with the
exact 95% interval and the count of program statuses; then, for the CodeI/O sets, the tasks that at least
one of ``--samples`` sampled answers solves (pass@k; by default at the seed harness's GRPO group size and
temperature, read from ``harness_repo/seeds/code/harness.yaml``: a group with one verified answer is one GRPO
can learn from).  Needs Docker and the sandbox image.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import records  # noqa: E402
import rl_backend.local  # noqa: E402,F401  (first: sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import yaml  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from domains.code import CodeDomain  # noqa: E402
from harness_repo.contract import TaskSpec  # noqa: E402
from meta_agent.heldout_stats import accuracy  # noqa: E402
from rl_backend.model import resolve_model  # noqa: E402

BATCH = 16
SEED_GRPO = yaml.safe_load((Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "code" /
                            "harness.yaml").read_text(encoding="utf-8"))["grpo"]


def answers(model, tokenizer, domain: CodeDomain, tasks, max_tokens: int, temperature: float = 0.0) -> list[str]:
    """Answers to the trusted exam prompt, ``BATCH`` at a time: greedy at temperature 0, else sampled."""
    out = []
    for start in range(0, len(tasks), BATCH):
        prompts = [tokenizer.apply_chat_template(domain.exam_messages(t), tokenize=False, add_generation_prompt=True)
                   for t in tasks[start:start + BATCH]]
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0} if temperature else \
            {"do_sample": False}
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=max_tokens, pad_token_id=tokenizer.pad_token_id, **sampling)
        out += tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out


def main() -> None:
    parser = records.parser("bench_code_policy", __doc__)
    parser.add_argument("--train", type=int, default=22)
    parser.add_argument("--heldout", type=int, default=27)
    parser.add_argument("--humaneval", type=int, default=40)
    parser.add_argument("--max-tokens", type=records.positive, default=128)
    parser.add_argument("--samples", type=int, default=SEED_GRPO["group_size"],
                        help="sampled answers per CodeI/O task for pass@k (default: the seed's group size); 0 skips")
    parser.add_argument("--temperature", type=float, default=SEED_GRPO["temperature"],
                        help="sampling temperature of pass@k (default: the seed's)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed of the sampled answers")
    parser.add_argument("--no-greedy", action="store_true", help="only the sampled answers (pass@k)")
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args()
    if min(args.train, args.heldout, args.humaneval, args.samples) < 0:
        records.refuse("--train, --heldout, --humaneval and --samples are counts: give 0 or more")
    if args.model_path and not Path(args.model_path).is_dir():
        records.refuse(f"--model-path {args.model_path} is not a folder: give a saved policy's folder")
    load = records.load_now()
    figures: dict = {}
    policy = resolve_model(args.model_path)
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32).eval()
    domain = CodeDomain()
    sets = {
        "codeio train (max_lines 4)": domain.tasks("train", [TaskSpec(name="codeio", config={"max_lines": 4})],
                                                   args.train, seed=0),
        "codeio held-out": domain.tasks("heldout", [TaskSpec(name="codeio")], args.heldout, seed=0),
        "HumanEval": domain.tasks("heldout", [TaskSpec(name="humaneval")], args.humaneval, seed=0),
    }
    print(f"{'set':<28} {'solved':>7} {'of':>4} {'95% interval':>16} {'gen s':>6}  statuses")
    for name, tasks in sets.items():
        if not tasks:
            continue
        if not args.no_greedy:
            started = time.monotonic()
            texts = answers(model, tokenizer, domain, tasks, args.max_tokens)
            seconds = time.monotonic() - started
            verdicts = domain.verify_batch([(t.data_source, text, t.ground_truth) for t, text in zip(tasks, texts)])
            solved = [int(score) for score, _ in verdicts]
            acc = accuracy(solved)
            statuses = Counter(info["status"] for _, info in verdicts)
            print(f"{name:<28} {sum(solved):>7} {len(tasks):>4} {f'[{acc.low:.3f}, {acc.high:.3f}]':>16} "
                  f"{seconds:>6.0f}  " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))
            figures[name] = {"solved": sum(solved), "asked": len(tasks), "statuses": dict(statuses)}
        if args.samples and name != "HumanEval":
            torch.manual_seed(args.seed)
            repeated = [t for t in tasks for _ in range(args.samples)]
            texts = answers(model, tokenizer, domain, repeated, args.max_tokens, args.temperature)
            verdicts = domain.verify_batch([(t.data_source, text, t.ground_truth) for t, text in zip(repeated, texts)])
            hit = {t.task_id for t, (score, _) in zip(repeated, verdicts) if score == 1.0}
            acc = accuracy([int(t.task_id in hit) for t in tasks])
            answers_right = sum(int(score) for score, _ in verdicts)
            print(f"{name + f' pass@{args.samples}':<28} {len(hit):>7} {len(tasks):>4} "
                  f"{f'[{acc.low:.3f}, {acc.high:.3f}]':>16}         {answers_right} of {len(verdicts)} sampled "
                  f"answers verified (T={args.temperature})")
            figures[f"{name} pass@{args.samples}"] = {"solved": len(hit), "asked": len(tasks),
                                                      "answers_right": answers_right, "answers": len(verdicts)}
    records.write(args, {k: v for k, v in vars(args).items() if k not in ("record", "no_record", "bench")},
                  figures, load)


if __name__ == "__main__":
    main()

"""Benchmark: generation throughput of the local policy next to the machine's compute limit.

The local round spends most of its time generating: GRPO rollouts (sampled, all of a
step's groups in one ``generate``) and the trusted held-out exam (greedy).  This prints,
per batch size, the tokens per second those two calls reach with the base policy
(SmolLM2-135M, float32, KV cache on), both as rounds make them (``shared``: the prompts'
common opening computed once, ``rl_backend.shared_prefix``) and as a plain ``generate``
on the padded batch (``plain``, what rounds did before), back to back on the same prompts,
and the ratio to an upper bound:

    limit tokens/s = measured matmul FLOP/s / FLOPs per token
    FLOPs per token = 2 x parameters (LM head included) + 4 x layers x hidden x context

The matmul rate is the best of a few float32 GEMMs shaped like the model's MLP
projection, on ``torch.get_num_threads()`` threads.  "Useful" tokens are those up to and
including each answer's end-of-sequence token; "computed" adds the positions a batch
keeps decoding after a row has finished, which cost the same (the exam's ``shared`` path leaves finished rows out
every 16 tokens, ``rl_backend.exam_loop.DROP_FINISHED_EVERY``, so it computes fewer of them).  ``ratio`` is
computed tokens/s over the limit, ``useful ratio`` useful tokens/s over it.  Neither counts the prompts'
prefill as tokens, though its time is in the call's: ``ceiling`` is the ratio the call would reach if its
prefill and its decoding both ran at the limit, computed / (computed + prefilled tokens), where the ``shared``
path prefills the common opening once and each row's remainder (padded to the longest), and ``plain`` every row's
padded prompt.  A call whose prompts are long next to its answers cannot pass its ceiling on any machine.

    .venv/bin/python bench/bench_generation.py                  # batches 8, 32, 64
    .venv/bin/python bench/bench_generation.py --batches 8 64 --threads 2
    .venv/bin/python bench/bench_generation.py --paths shared      # only the path rounds use

Run it on an idle machine: other processes on the same cores lower every figure.  Rounds and
this bench run with ``OMP_WAIT_POLICY=PASSIVE`` (set by ``rl_backend.local``: OpenMP threads sleep at once);
on a machine of your own, ``GOMP_SPINCOUNT=10000`` (spin about 0.1 ms, then sleep) made a decoding step ~1.7x
faster, and ``OMP_WAIT_POLICY=ACTIVE`` spins, which busy cores punish.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import records

import rl_backend.local  # noqa: F401  (first: sets OpenMP's wait policy before torch loads, as a round does)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from domains.math import MathDomain
from rl_backend.exam_loop import DROP_FINISHED_EVERY
from rl_backend.model import resolve_model
from rl_backend.shared_prefix import generate_shared_prefix, shared_prefix_length

ROLLOUT_TOKENS = 48
"""The seed harness's ``max_completion_length`` when this bench was written."""


@dataclass
class Throughput:
    kind: str
    path: str
    batch: int
    seconds: float
    useful: int
    computed: int
    prefilled: int


def matmul_flops(threads: int, repeats: int = 5) -> float:
    """Best float32 FLOP/s of a (512 x 576) @ (576 x 1536) matmul, the shape of the model's MLP."""
    torch.set_num_threads(threads)
    a, b = torch.randn(512, 576), torch.randn(576, 1536)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(20):
            a @ b
        best = min(best, (time.perf_counter() - start) / 20)
    return 2 * 512 * 576 * 1536 / best


def flops_per_token(model: torch.nn.Module, context: int) -> float:
    """2 x parameters (tied LM head counted once, as it is used once) + attention over ``context`` tokens."""
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    return 2 * params + 4 * cfg.num_hidden_layers * cfg.hidden_size * context


def measure(model: torch.nn.Module, tokenizer, prompts: list[str], batch: int, sample: bool,
            max_new_tokens: int, path: str) -> Throughput:
    """One ``generate`` of ``batch`` prompts (repeated from ``prompts``) along ``path`` (``shared`` or ``plain``),
    timed after a warm-up call."""
    texts = [prompts[i % len(prompts)] for i in range(batch)]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    kwargs = dict(max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, use_cache=True)
    kwargs.update(do_sample=True, temperature=1.0, top_p=1.0, top_k=0) if sample else kwargs.update(
        do_sample=False, temperature=None, top_p=None, top_k=None)
    drop = DROP_FINISHED_EVERY if path == "shared" and not sample else None
    width = enc["input_ids"].shape[1]
    shared = shared_prefix_length(enc["input_ids"], enc["attention_mask"]) if path == "shared" else 0
    prefilled = shared + batch * (width - shared)
    with torch.no_grad():
        model.generate(**{k: v[:2] for k, v in enc.items()}, **{**kwargs, "max_new_tokens": 4})
        start = time.perf_counter()
        if path == "shared":  # as rounds call it: the exam also leaves finished answers out every 16 tokens
            out = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], drop_finished_every=drop,
                                         **kwargs)
        else:
            out = model.generate(**enc, **kwargs)
        seconds = time.perf_counter() - start
    new = out[:, enc["input_ids"].shape[1]:]
    useful = computed = 0
    for row in new.tolist():
        stop = next((i for i, t in enumerate(row) if t == tokenizer.eos_token_id), None)
        useful += len(row) if stop is None else stop + 1
        # a row left out once it ended was decoded to the end of its 16-token chunk, or of the call
        computed += len(row) if stop is None or not drop else min(len(row), -(-(stop + 1) // drop) * drop)
    return Throughput("rollout" if sample else "exam", path, batch, seconds, useful, computed, prefilled)


def main() -> None:
    parser = records.parser("bench_generation", __doc__)
    parser.add_argument("--batches", type=records.positive, nargs="+", default=[8, 32, 64])
    parser.add_argument("--threads", type=records.positive, default=torch.get_num_threads())
    parser.add_argument("--paths", nargs="+", choices=["shared", "plain"], default=["shared", "plain"])
    args = parser.parse_args()
    if max(args.batches) > 64:
        records.refuse(f"--batches {max(args.batches)}: the exam draws 64 tasks, so give batches of 1 to 64")
    load = records.load_now()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = resolve_model(None)
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    domain = MathDomain()
    tasks = domain.tasks("heldout", domain.eval_specs, 64, 0)
    prompts = [tokenizer.apply_chat_template(domain.exam_messages(t), tokenize=False, add_generation_prompt=True)
               for t in tasks]
    prompt_len = max(len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts)
    rate = matmul_flops(args.threads)
    rows = []
    for batch in args.batches:
        for sample, new in ((True, ROLLOUT_TOKENS), (False, domain.exam_max_tokens)):
            for path in args.paths:  # back to back, so both paths see the same load
                rows.append(measure(model, tokenizer, prompts, batch, sample, new, path))
    print(f"threads {args.threads}, matmul {rate / 1e9:.1f} GFLOP/s, prompt <= {prompt_len} tokens")
    print(f"{'call':8} {'path':7} {'batch':>5} {'new':>4} {'s':>7} {'useful tok/s':>12} {'computed tok/s':>14} "
          f"{'limit tok/s':>11} {'ratio':>6} {'useful ratio':>12} {'ceiling':>7}")
    calls = []
    for r in rows:
        new = ROLLOUT_TOKENS if r.kind == "rollout" else domain.exam_max_tokens
        limit = rate / flops_per_token(model, prompt_len + new // 2)
        computed = r.computed / r.seconds
        ceiling = r.computed / (r.computed + r.prefilled)
        print(f"{r.kind:8} {r.path:7} {r.batch:5d} {new:4d} {r.seconds:7.2f} {r.useful / r.seconds:12.1f} "
              f"{computed:14.1f} "
              f"{limit:11.1f} {computed / limit:6.2f} {r.useful / r.seconds / limit:12.2f} {ceiling:7.2f}")
        calls.append({"call": r.kind, "path": r.path, "batch": r.batch, "seconds": round(r.seconds, 2),
                      "ratio": round(computed / limit, 3), "useful_ratio": round(r.useful / r.seconds / limit, 3),
                      "ceiling": round(ceiling, 3)})
    records.write(args, {"batches": args.batches, "threads": args.threads, "paths": args.paths},
                  {"matmul_gflops": round(rate / 1e9, 1), "calls": calls}, load)


if __name__ == "__main__":
    main()

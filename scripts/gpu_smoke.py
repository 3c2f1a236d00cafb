"""GPU smoke test for a lent machine: one GRPO step, the exam, and the filter rule, on a random model.

    python scripts/gpu_smoke.py                       # CUDA, a ~0.8B random Llama in bf16 (< 5 minutes on an H100)
    python scripts/gpu_smoke.py --device cpu --tiny   # the same path on a CPU in seconds (what CI can run)

Needs torch and transformers only: no download, no network, no verl, vLLM, Ray, TRL or Docker.  The
model is randomly initialised from a Llama config and the tokenizer is a byte-level one built here with
a chat template, so nothing is fetched.  What runs:

1. **GRPO step** -- ``prompts x group`` sampled completions, a verifiable reward per completion (does the
   answer's byte count hit the prompt's target; a random policy gets a spread of rewards), a keep mask
   that drops some trajectories as a harness filter would, advantages from ``rl_backend.grpo_rule`` (the
   project's rule for filtered trajectories, identical on both backends), a clipped policy-gradient loss
   over the trajectories that train, one AdamW step.  TRL is not needed: the step is plain torch, so the
   line it prints says so; when TRL *is* importable it says that too (the local backend's trainer needs
   the Docker harness runtime, which this machine lacks, so it is never run here).
2. **The exam** -- the project's greedy exam loop (``rl_backend.exam_loop.sit_exam``: left-padded batches of
   the domain's chat prompts, greedy within the exam budget, stopped at end-of-turn), the one the local and verl
   backends' exams run, on a length domain scored by its verifier.
3. **The advantage rule** -- checked on the step's own rewards: dropped and lone trajectories get 0 and no
   loss, each trained group's advantages have mean 0.

It prints tokens/s for generation and for training with the model FLOPs they imply (``2 N`` per generated
token, ``6 N`` per trained token, ``N`` the parameters outside the embedding; attention is left out) against
the GPU's dense bf16 peak (H100/H200 SXM: 989 TFLOP/s).  Exit status 0 when every check held.

This file is the GRPO step and the checks; ``smoke_model.py`` builds the random model and reads the machine,
``smoke_exam.py`` holds the length domain and runs the exam.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the project modules need only the stdlib and torch: a lent machine has torch and transformers, not the stack
from rl_backend.grpo_rule import group_advantages, trains  # noqa: E402
from smoke_exam import make_prompts, reward, run_exam  # noqa: E402 - the exam and the step's length tasks
from smoke_model import (build_model, build_tokenizer, dense_params, generate, importable,  # noqa: E402
                         peak_tflops, sync, versions)


def completion_mask(ids: torch.Tensor, eos: int) -> torch.Tensor:
    """1 up to and including the first EOS, 0 after it (generate pads finished rows)."""
    is_eos = ids == eos
    after = (is_eos.cumsum(dim=1) - is_eos.long()) > 0
    return (~after).long()


def grpo_step(model, tok, optimizer, args, device: str) -> dict:
    """One GRPO step in plain torch with the project's filter rule; returns what it measured."""
    model.train()
    prompts = make_prompts(args.prompts, args.seed)
    messages = [m for m, _ in prompts for _ in range(args.group)]
    targets = [t for _, t in prompts for _ in range(args.group)]
    groups = [i // args.group for i in range(len(messages))]
    sync(device)
    t0 = time.perf_counter()
    enc, completion = generate(model, tok, messages, args.max_new_tokens, sample=True, device=device)
    sync(device)
    gen_s = time.perf_counter() - t0
    mask = completion_mask(completion, tok.eos_token_id)
    texts = [tok.decode(c[m.bool()], skip_special_tokens=True) for c, m in zip(completion, mask)]
    rewards = [reward(t, target) for t, target in zip(texts, targets)]
    # a harness filter: drop every third trajectory, and all but one member of the last group (a lone survivor)
    keep = [i % 3 != 2 for i in range(len(messages))]
    last = groups[-1]
    keep = [k if g != last else i % args.group == 0 for i, (k, g) in enumerate(zip(keep, groups))]
    advantages = group_advantages(rewards, groups, keep)
    trained = trains(groups, keep)

    input_ids = torch.cat([enc["input_ids"], completion], dim=1)
    attention = torch.cat([enc["attention_mask"], mask], dim=1)
    loss_mask = mask * torch.tensor(trained, device=device).unsqueeze(1)
    adv = torch.tensor(advantages, device=device, dtype=torch.float32)
    prompt_len = enc["input_ids"].shape[1]
    before = next(p for p in model.parameters() if p.requires_grad).detach().clone()
    sync(device)
    t0 = time.perf_counter()
    tokens_in_loss = loss_mask.sum().clamp(min=1)
    total_loss = 0.0
    with torch.no_grad():  # the sampling policy's log-probs (one step: equal to the current ones)
        old = [token_logps(model, input_ids[s], attention[s], prompt_len)
               for s in batches(len(messages), args.micro_batch)]
    for s, old_logp in zip(batches(len(messages), args.micro_batch), old):
        logp = token_logps(model, input_ids[s], attention[s], prompt_len)
        ratio = torch.exp(logp - old_logp)
        a = adv[s].unsqueeze(1)
        per_token = -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a)
        loss = (per_token * loss_mask[s]).sum() / tokens_in_loss  # token-mean over the whole batch
        loss.backward()
        total_loss += float(loss.detach())
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    sync(device)
    train_s = time.perf_counter() - t0
    changed = not torch.equal(before, next(p for p in model.parameters() if p.requires_grad).detach())
    generated = int(mask.sum())
    trained_tokens = int(attention.sum())  # forward twice (old log-probs) + backward: counted as one 6N pass
    return {"trajectories": len(messages), "kept": sum(keep), "trained": sum(trained), "rewards": rewards,
            "groups": groups, "keep": keep, "advantages": advantages, "trained_mask": trained,
            "loss": total_loss, "params_changed": changed, "generated_tokens": generated, "gen_s": gen_s,
            "train_tokens": trained_tokens, "train_s": train_s,
            "mean_response_tokens": generated / len(messages)}


def token_logps(model, ids: torch.Tensor, attention: torch.Tensor, prompt_len: int) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=attention).logits[:, prompt_len - 1:-1].float()
    return torch.gather(logits.log_softmax(-1), 2, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)


def batches(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def check_rule(step: dict) -> list[str]:
    """The advantage rule on the step's own rewards; returns what failed (empty when it held)."""
    failures = []
    for a, k, t in zip(step["advantages"], step["keep"], step["trained_mask"]):
        if not t and a != 0.0:
            failures.append(f"an untrained trajectory (keep={k}) has advantage {a}")
    lone = [g for g in set(step["groups"]) if sum(k for k, gg in zip(step["keep"], step["groups"]) if gg == g) == 1]
    if not lone:
        failures.append("the step has no group with a lone kept member: the rule was not exercised")
    for g in set(step["groups"]):
        adv = [a for a, gg, t in zip(step["advantages"], step["groups"], step["trained_mask"]) if gg == g and t]
        if adv and abs(sum(adv) / len(adv)) > 1e-6:
            failures.append(f"group {g}: trained advantages have mean {sum(adv) / len(adv)}")
        if g in lone and adv:
            failures.append(f"group {g} has one kept member yet trains")
    if not any(step["trained_mask"]):
        failures.append("nothing trained")
    return failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="GPU smoke test: one GRPO step, the exam and the filter rule on a "
                                            "random model")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="CPU-sized model and batch (seconds)")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--exam", type=int, default=64, help="exam tasks")
    p.add_argument("--exam-tokens", type=int, default=512, help="exam budget per answer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=2, help="GRPO steps; the last one's rates are reported")
    args = p.parse_args(argv)
    if args.tiny:
        args.hidden, args.layers, args.prompts, args.group = 64, 2, 3, 4
        args.max_new_tokens, args.micro_batch, args.exam, args.exam_tokens, args.steps = 16, 6, 4, 16, 1
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu --tiny", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    started = time.perf_counter()
    peak, name = peak_tflops(args.device)
    tok = build_tokenizer()
    model = build_model(tok, args, args.device, dtype)
    n = dense_params(model)
    print(f"device: {name}; torch {torch.__version__}; dtype {dtype}; random Llama {args.layers}x{args.hidden}, "
          f"{n / 1e6:.1f}M dense params; vocab {len(tok)}")
    used = versions()
    print(f"versions: torch {used['here']['torch']}, transformers {used['here']['transformers']}; the GPU install "
          f"line (docs/gpu.md) gives torch {used['install_line']['torch']}, transformers "
          f"{used['install_line']['transformers']}")
    print("TRL: " + ("importable (not used: the local trainer needs the Docker harness runtime)"
                     if importable("trl") else "absent: the GRPO step is plain torch")
          + "; verl: " + ("importable" if importable("verl") else "absent"))

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for k in range(args.steps):  # the first step pays for CUDA kernel selection: the last one is reported
        step = grpo_step(model, tok, optimizer, args, args.device)
        print(f"step {k + 1}/{args.steps}: generation {step['gen_s']:.2f} s, update {step['train_s']:.2f} s")
    exam = run_exam(model, tok, args, args.device)
    failures = check_rule(step)
    if not step["params_changed"]:
        failures.append("the AdamW step changed no parameter")
    if step["loss"] != step["loss"]:
        failures.append("the loss is NaN")

    def rate(tokens: int, seconds: float, flops_per_token: float) -> str:
        tps = tokens / seconds if seconds else float("nan")
        tflops = tps * flops_per_token / 1e12
        mfu = f", {100 * tflops / peak:.2f}% of {peak:.0f} TFLOP/s bf16" if peak else ""
        return f"{tokens} tokens in {seconds:.2f} s = {tps:,.0f} tokens/s, {tflops:.2f} TFLOP/s{mfu}"

    print(f"GRPO step: {step['trajectories']} trajectories ({args.prompts} prompts x {args.group}), "
          f"{step['kept']} kept by the filter, {step['trained']} train (rl_backend.grpo_rule); "
          f"mean response {step['mean_response_tokens']:.1f} tokens; loss {step['loss']:.4f}; "
          f"params changed: {step['params_changed']}")
    print(f"  rollout (sampled, HF generate): {rate(step['generated_tokens'], step['gen_s'], 2 * n)}")
    print(f"  update (fwd x2 + bwd, AdamW):   {rate(step['train_tokens'], step['train_s'], 6 * n)}")
    print(f"exam: {exam['which']}")
    print(f"  {exam['tasks']} tasks, budget {exam['budget']} tokens, {exam['truncated']} cut off, "
          f"verified {exam['verified']:.3f}; greedy: {rate(exam['tokens'], exam['seconds'], 2 * n)}")
    plain = exam["plain_generate"]
    print(f"  (its first pass: {exam['first_pass_seconds']:.2f} s; the figure above is its second)")
    print(f"  the same batches through plain model.generate: {rate(plain['tokens'], plain['seconds'], 2 * n)}; "
          f"{plain['same_answers']}/{exam['tasks']} answers token for token the same")
    print("advantage rule: " + ("held (dropped and lone trajectories 0 and out of the loss; "
                                "trained groups centred)" if not failures else "FAILED"))
    for f in failures:
        print(f"  FAILED: {f}")
    summary = {k: v for k, v in step.items() if k not in ("rewards", "groups", "keep", "advantages", "trained_mask")}
    print("json: " + json.dumps({"device": name, "dense_params": n, "step": summary, "exam": exam, "versions": used,
                                 "peak_bf16_tflops": peak, "failures": failures,
                                 "total_s": round(time.perf_counter() - started, 1)}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

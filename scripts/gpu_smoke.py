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
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# both need only the stdlib and torch: a lent machine has torch and transformers, not the project's stack
from rl_backend.exam_loop import EXAM_BATCH_SIZE, sit_exam  # noqa: E402
from rl_backend.grpo_rule import group_advantages, trains  # noqa: E402

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0}
"""Dense bf16 tensor-core peaks (no sparsity) by GPU name fragment."""

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def build_tokenizer():
    """A byte-level BPE tokenizer without merges (256 byte tokens + specials) and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    specials = ["<|end|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"]
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|end|>", pad_token="<|pad|>",
                                  additional_special_tokens=specials[2:], padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_model(tok, args, device: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tok), hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=max(args.hidden // 128, 2),
                         num_key_value_heads=max(args.hidden // 512, 1), max_position_embeddings=4096,
                         bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         tie_word_embeddings=False)
    torch.manual_seed(args.seed)
    with torch.device(device):  # initialised where it runs: a CPU init of ~1B parameters takes minutes
        model = LlamaForCausalLM(config).to(dtype=dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def dense_params(model) -> int:
    """Parameters every token multiplies through (the input embedding is a lookup, not a matmul)."""
    return sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()


def peak_tflops(device: str) -> tuple[float | None, str]:
    if device != "cuda":
        return None, "cpu"
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None), name


def make_prompts(n: int, seed: int) -> list[tuple[list[dict], int]]:
    """Chat prompts asking for an answer of a given byte length: a reward a random policy can sometimes earn."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        target = rng.randint(4, 24)
        out.append(([{"role": "system", "content": "Answer briefly."},
                     {"role": "user", "content": f"Task {i}: write exactly {target} characters."}], target))
    return out


def reward(text: str, target: int) -> float:
    return max(0.0, 1.0 - abs(len(text) - target) / target)


@torch.no_grad()
def generate(model, tok, messages: list[list[dict]], max_new: int, sample: bool, device: str):
    texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    kwargs = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0) if sample else dict(do_sample=False)
    out = model.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, **kwargs)
    return enc, out[:, enc["input_ids"].shape[1]:]


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


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass
class LengthTask:
    """A ``TaskLike`` of the length domain below."""

    task_id: str
    target: int
    data_source: str = "length"

    @property
    def question(self) -> str:
        return f"Task {self.task_id}: write exactly {self.target} characters."

    @property
    def ground_truth(self) -> dict:
        return {"target": self.target}

    def template_vars(self) -> dict:
        return {"target": self.target}


class LengthDomain:
    """A ``DomainLike`` a random policy can score on (the math domain needs reasoning-gym, absent here)."""

    name = "length"
    eval_specs: list = []
    reward_range = (0.0, 1.0)
    exam_max_tokens = 512

    def tasks(self, split: str, specs: list, n: int, seed: int) -> list[LengthTask]:
        return [LengthTask(f"{split}-{i}", t) for i, (_, t) in enumerate(make_prompts(n, seed))]

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        score = reward(response, int(ground_truth["target"]))
        return (1.0 if score >= 0.9 else 0.0), {"length": len(response), "score": score}

    def exam_messages(self, task: LengthTask) -> list[dict]:
        return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": task.question}]


def run_exam(model, tok, args, device: str) -> dict:
    """The project's exam loop (``rl_backend.exam_loop.sit_exam``, which the local and verl backends' exams run)
    on the length domain, scored by its verifier, and the same batches through a plain ``model.generate``.

    The loop runs twice and the second pass is reported: on an H200 the first pass over a new range of sequence
    lengths took 28-32 s and a later one 7-8 s for the same tokens, whichever path ran first, so timing a
    single pass of each would credit whichever went second."""
    domain = LengthDomain()
    tasks = domain.tasks("heldout", [], args.exam, args.seed + 1)
    _, first_s = timed(device, lambda: sit_exam(domain, tasks, model, tok, args.exam_tokens))
    plain, plain_s = timed(device, lambda: plain_exam(domain, tasks, model, tok, args.exam_tokens))
    answers, seconds = timed(device, lambda: sit_exam(domain, tasks, model, tok, args.exam_tokens))
    score = sum(domain.verify("length", a.response, t.ground_truth)[0] for a, t in zip(answers, tasks)) / len(tasks)
    return {"which": "rl_backend.exam_loop.sit_exam (the project's exam loop) on a length domain",
            "tasks": args.exam, "budget": args.exam_tokens, "tokens": sum(len(a.token_ids) for a in answers),
            "seconds": seconds, "first_pass_seconds": first_s, "truncated": sum(a.truncated for a in answers),
            "verified": score,
            "plain_generate": {"tokens": sum(len(ids) for ids in plain), "seconds": plain_s,
                               "same_answers": sum(a.token_ids == ids for a, ids in zip(answers, plain))}}


def timed(device: str, work):
    """``work()`` and the seconds it took, the device synchronised on both sides."""
    sync(device)
    t0 = time.perf_counter()
    result = work()
    sync(device)
    return result, time.perf_counter() - t0


@torch.no_grad()
def plain_exam(domain, tasks: list, model, tok, max_new: int) -> list[list[int]]:
    """The exam's batches through ``model.generate`` alone (no shared-prefix cache): each answer's ids up to and
    including end-of-turn."""
    answers: list[list[int]] = []
    for start in range(0, len(tasks), EXAM_BATCH_SIZE):
        messages = [domain.exam_messages(t) for t in tasks[start:start + EXAM_BATCH_SIZE]]
        _, out = generate(model, tok, messages, max_new, sample=False, device=str(model.device))
        for row in out.tolist():
            stop = next((i for i, t in enumerate(row) if t == tok.eos_token_id), None)
            answers.append(row if stop is None else row[:stop + 1])
    return answers


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


def install_line_versions() -> dict[str, str | None]:
    """The torch and transformers the GPU install line gives (docs/gpu.md's torch line, the [verl] extra's
    transformers pin), read from this checkout: what a verl round on a GPU node runs on."""
    root = Path(__file__).resolve().parents[1]

    def find(path: Path, pattern: str) -> str | None:
        match = re.search(pattern, path.read_text()) if path.exists() else None
        return match.group(1) if match else None

    return {"torch": find(root / "docs" / "gpu.md", r'pip install "torch==([\d.]+)"'),
            "transformers": find(root / "pyproject.toml", r'"transformers==([\d.]+)"')}


def versions() -> dict:
    """What this run used, beside what the GPU install line gives."""
    import transformers

    line = install_line_versions()
    here = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    return {"here": here, "install_line": line, "same": {k: here[k] == line[k] for k in here}}


def importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - absent or broken: either way not usable here
        return False
    return True


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

"""The GPU smoke test's exam: a length domain a random policy can score on, through the project's exam loop.

``make_prompts`` and ``reward`` are also the GRPO step's tasks (``scripts/gpu_smoke.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl_backend.exam_loop import EXAM_BATCH_SIZE, sit_exam
from smoke_model import generate, timed


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

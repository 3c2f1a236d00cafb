"""The held-out exam: greedy answers to a domain's exam prompts, in batches, stopped at end-of-turn, then scored.

    answers = sit_exam(domain, tasks, model, tokenizer, max_new_tokens=512)
    answers[0].response, answers[0].token_ids, answers[0].truncated
    rows = heldout_eval(spec, model, tokenizer, policy_ref="ckpt-3", step=2)   # scored archive rows

One loop for every exam: the local backend's (``rl_backend.local.heldout_eval``), the verl backend's
(``rl_backend.verl.exam``, on a round's exported weights, through :func:`heldout_eval`) and the GPU smoke script
(``scripts/gpu_smoke.py``, on a machine with torch and transformers only).  So this module needs torch and
nothing else of the project's stack at import (no pydantic, TRL, verl or pyarrow): ``domain`` and ``tasks`` are
duck-typed (``exam_messages(task)``), the model and tokenizer are transformers'.  :func:`heldout_eval` imports the
row builder (pyarrow) when it is called; nothing here needs TRL, so the verl path's install (``.[verl]``, whose
TRL is verl's own pin) sits the same exam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl_backend.shared_prefix import as_list, generate_shared_prefix

EXAM_BATCH_SIZE = 64
DROP_FINISHED_EVERY = 16
"""The exam generates 16 tokens at a time and leaves answers that ended out of the next 16: a batch of 64 otherwise
decodes every row until its longest answer ends (the base policy's math answers average 13 tokens of a 96-token
budget).  Greedy, so the answers are the same up to rounding ties (the same on the 128-task math exam)."""


@dataclass(frozen=True)
class ExamAnswer:
    """One greedy answer: the rendered prompt, the chat messages, the answer's token ids (up to and including the
    end-of-turn token) and its text."""

    prompt: str
    messages: list[dict]
    token_ids: list[int]
    response: str
    truncated: bool
    """No end-of-turn token within the budget: the answer was cut off."""


@torch.no_grad()
def sit_exam(domain: Any, tasks: list, model: Any, tokenizer: Any, max_new_tokens: int,
             batch_size: int = EXAM_BATCH_SIZE) -> list[ExamAnswer]:
    """Greedy answers to ``domain.exam_messages(task)`` for each task, in order, within ``max_new_tokens`` each.
    The tokenizer pads on the left (the answers start where the prompts end)."""
    eos = {tokenizer.eos_token_id, *as_list(model.generation_config.eos_token_id)}
    model.eval()
    answers: list[ExamAnswer] = []
    for start in range(0, len(tasks), batch_size):
        messages = [domain.exam_messages(t) for t in tasks[start:start + batch_size]]
        texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        out = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], max_new_tokens=max_new_tokens,
                                     do_sample=False, temperature=None, top_p=None, top_k=None,
                                     pad_token_id=tokenizer.pad_token_id,
                                     drop_finished_every=DROP_FINISHED_EVERY)
        for j, (text, chat) in enumerate(zip(texts, messages)):
            ids = out[j, enc["input_ids"].shape[1]:].tolist()
            stop = next((i for i, t in enumerate(ids) if t in eos), None)
            ids = ids if stop is None else ids[:stop + 1]
            answers.append(ExamAnswer(prompt=text, messages=chat, token_ids=ids, truncated=stop is None,
                                      response=tokenizer.decode(ids, skip_special_tokens=True)))
    return answers


def verify_all(domain: Any, items: list[tuple[str, str, dict]]) -> list[tuple[float, dict]]:
    """The domain's verdicts on ``(data_source, response, ground_truth)`` items, through its ``verify_batch``
    where it has one (SWE grades a batch's distinct patches concurrently), else one ``verify`` each."""
    batch = getattr(domain, "verify_batch", None)
    return batch(items) if batch is not None else [domain.verify(*item) for item in items]


def heldout_eval(spec: Any, model: Any, tokenizer: Any, policy_ref: str, step: int,
                 batch_size: int = EXAM_BATCH_SIZE) -> list[dict]:
    """The trusted exam of ``spec``'s round (a ``RoundSpec``): greedy answers on the held-out tasks with the
    domain's own prompt and budget, scored by the domain's verifier; trajectory rows of split ``heldout``.
    No harness file is involved."""
    import json

    from trajectory.rows import trajectory_row

    domain = spec.load_domain()
    max_new_tokens = spec.heldout_max_tokens or domain.exam_max_tokens
    tasks = domain.tasks("heldout", spec.heldout_specs or domain.eval_specs, spec.heldout_size, spec.heldout_seed)
    answers = sit_exam(domain, tasks, model, tokenizer, max_new_tokens, batch_size=batch_size)
    verdicts = verify_all(domain, [(t.data_source, a.response, t.ground_truth) for t, a in zip(tasks, answers)])
    return [trajectory_row(
        traj_id=f"{spec.run_id}-r{spec.round}-heldout-{i}", run_id=spec.run_id, round=spec.round, step=step,
        group_id=f"heldout-{i}", sample_idx=0, domain=domain.name, task_id=task.task_id,
        data_source=task.data_source, split="heldout", prompt=answer.prompt, response=answer.response,
        messages=answer.messages + [{"role": "assistant", "content": answer.response}],
        ground_truth=task.ground_truth, verified=float(verified), verifier_info=json.dumps(info, default=str),
        response_tokens=len(answer.token_ids), truncated=answer.truncated,
        finish_reason="length" if answer.truncated else "stop", harness_commit=spec.harness_commit,
        policy_ref=policy_ref) for i, (task, answer, (verified, info)) in enumerate(zip(tasks, answers, verdicts))]

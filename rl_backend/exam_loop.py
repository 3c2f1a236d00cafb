"""The held-out exam's generation: greedy answers to a domain's exam prompts, in batches, stopped at end-of-turn.

    answers = sit_exam(domain, tasks, model, tokenizer, max_new_tokens=512)
    answers[0].response, answers[0].token_ids, answers[0].truncated

One loop for every exam: the local backend's (``rl_backend.local.heldout_eval``, which scores and archives the
answers), the verl backend's (``rl_backend.verl.exam``, on a round's exported weights) and the GPU smoke script
(``scripts/gpu_smoke.py``, on a machine with torch and transformers only).  So this module needs torch and
nothing else of the project's stack (no pydantic, TRL, verl or pyarrow): ``domain`` and ``tasks`` are duck-typed
(``exam_messages(task)``), the model and tokenizer are transformers'.
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

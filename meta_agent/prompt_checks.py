"""Gate checks of a candidate's prompt templates, rendered in the sandbox over the sample's archived tasks.

Prompts are harness code too: a template can fail, grow past the prompt budget, or
print the answer into the prompt (a template that computes ``{{ 3 + 4 }}`` from the
question raises accuracy without teaching anything).  These checks compare what the
candidate's templates rendered with what ``main``'s rendered on the same tasks:

- ``prompt_render``: any template error rejects;
- ``prompt_length``: more prompts over ``max_prompt_length`` than under ``main`` rejects
  (lengths are a tokenizer-free estimate; training re-checks with the real tokenizer);
- ``prompt_leak``: the gold answer appearing in a rendered prompt where ``main``'s prompt
  for the same task did not show it rejects (what "appearing" means belongs to the
  domain: ``Domain.leaks_answer``; some questions contain their own answer).
"""

from __future__ import annotations

import re
from typing import Callable

from meta_agent.digest_rows import json_obj

TOKEN = re.compile(r"\d|[^\W\d]+|[^\w\s]")
CHAT_OVERHEAD_TOKENS = 8
"""Role markers and separators a chat template adds around each message."""

Rendered = list[dict] | str
"""Chat messages, or the rendering error as text."""
TEMPLATE_VARS = ("name", "data_source", "config")
"""The ``task`` fields a prompt template sees (``Task.template_vars``), never an id or split: an id keys a
lookup of which tasks the gate will render (archived ones) and which it will not (training's)."""


def template_item(question: str, task_vars: dict) -> dict:
    """The render request item for one task: its question and only the fields in :data:`TEMPLATE_VARS`.

    Archived rows recorded older variables (``id``, ``split``): a backtest renders without them too.
    """
    return {"question": question, "task": {k: task_vars[k] for k in TEMPLATE_VARS if k in task_vars}}


def estimate_tokens(messages: list[dict]) -> int:
    """A tokenizer-free estimate: digits and punctuation one token each, words one each, plus chat overhead."""
    return sum(len(TOKEN.findall(m["content"])) + CHAT_OVERHEAD_TOKENS for m in messages)


def prompt_text(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)


def questions_of(rows: list[dict]) -> list[str]:
    """Each archived row's task question as the trainer recorded it ("" where it recorded none)."""
    tasks = [json_obj(r.get("task")) for r in rows]
    return [t["question"] if isinstance(t, dict) and isinstance(t.get("question"), str) else "" for t in tasks]


def leak_mask(rendered: list[Rendered], ground_truths: list[dict], leaks_answer: Callable[[str, dict], bool],
              questions: list[str] | None = None) -> list[bool]:
    """Which rendered prompts show their gold answer where their task's question (given) does not: a question that
    holds its own answer (``1 * 5`` for products) shows it in any prompt that asks it whole."""
    own = [bool(q) and leaks_answer(q, gt) for q, gt in zip(questions, ground_truths)] if questions is not None \
        else [False] * len(rendered)
    return [not isinstance(r, str) and not mine and leaks_answer(prompt_text(r), gt)
            for r, gt, mine in zip(rendered, ground_truths, own)]


def prompt_checks(main: list[Rendered], candidate: list[Rendered], ground_truths: list[dict],
                  leaks_answer: Callable[[str, dict], bool], max_prompt_length: int,
                  questions: list[str] | None = None) -> list[dict]:
    """The three prompt checks for aligned lists of rendered prompts (one per archived task).  ``questions`` (the
    tasks' own text, aligned): a task whose question itself holds its gold answer (``1 * 5`` for products) shows
    it in any prompt that asks it whole, so it is no leak of the template's (``Domain.leaks_answer``'s rule); without
    them, a template that prints a question main cut would be blamed for the question's own numbers."""
    n = len(candidate)
    errors = [c for c in candidate if isinstance(c, str)]
    checks = [{"name": "prompt_render", "passed": not errors,
               "detail": f"{len(errors)} of {n} prompts failed to render" + (f": {errors[0][:300]}" if errors else "")}]
    if errors:
        return checks

    def over(arm: list[Rendered]) -> int:
        return sum(1 for r in arm if not isinstance(r, str) and estimate_tokens(r) > max_prompt_length)

    own = [bool(q) and leaks_answer(q, gt) for q, gt in zip(questions, ground_truths)] if questions is not None \
        else [False] * n

    def leaks(arm: list[Rendered]) -> list[bool]:
        return leak_mask(arm, ground_truths, leaks_answer, questions)

    longest = max((estimate_tokens(r) for r in candidate if not isinstance(r, str)), default=0)
    over_main, over_cand = over(main), over(candidate)
    checks.append({"name": "prompt_length", "passed": over_cand <= over_main,
                   "detail": f"prompts over max_prompt_length={max_prompt_length} (estimated tokens): "
                             f"{over_main} -> {over_cand} of {n}; longest {longest}"})
    leak_main, leak_cand = leaks(main), leaks(candidate)
    new_leaks = sum(1 for m, c in zip(leak_main, leak_cand) if c and not m)
    checks.append({"name": "prompt_leak", "passed": new_leaks == 0,
                   "detail": f"rendered prompts containing the gold answer: {sum(leak_main)} -> {sum(leak_cand)} of {n}"
                             f" ({new_leaks} where main's prompt for the same task did not"
                             + (f"; {sum(own)} whose question itself holds the answer not counted" if any(own) else "")
                             + ")"})
    return checks

"""Does the question arrive whole?  main's rendered prompts against each task's question (issue 44).

A template can cut what the policy is asked (a slice, ``truncate``, a first sentence, a ``replace`` that drops a
sign, a question never printed): the gate's prompt checks (render, length, leak) compare a candidate with main and
never read whether the task is in the prompt, so a cut question was never named, only its downstream modes (flat
groups, unsolved tasks).  Here trusted code reads main's rendered prompts (archive rows: the sandbox's output, read
as bounded text, never run) against the question the trainer recorded for the row: the question's words, numbers
and arithmetic signs, case and whitespace aside, must appear in the prompt as one run, in order.

    lost("What is 4 - 9?", "What is 4 9?")   # ['-', '9'] (from the first token the prompt does not carry on)
    checks, findings = question_checks(rows)  # main:question_cut where main's prompts cut a question
"""

from __future__ import annotations

import re

from meta_agent.digest_rows import example, json_obj

NAME = "question_cut"
MODE = "main:" + NAME
EXAMPLES = 3
MOST = 0.5
"""Above this share of prompts that lose part of their question the finding is an error (most tasks are not asked
whole), else a warning."""
MAX_CHARS = 50_000
"""The most of one question read (hostile text: bounded); of a prompt, four times as much."""
_TOKEN = re.compile(r"\d+|[^\W\d_]+|[-+*/=^%<>()×÷−]")
"""What a question says: words, digit runs and arithmetic signs (other punctuation and all whitespace aside)."""
_SEP = "\x00"


SPELLED = {"times": "*", "×": "*", "plus": "+", "minus": "-", "−": "-", "÷": "/"}
"""A sign and the word or glyph that says the same (``3 times 4`` asks ``3 * 4``): read as one token, so a template
that spells a sign loses nothing, and one that drops it still does."""


def tokens(text: str, limit: int = MAX_CHARS) -> list[str]:
    """``text``'s words, digit runs and signs, lower-cased, a spelled sign as its sign (:data:`SPELLED`), from its
    first ``limit`` characters (the last token of a text cut there is dropped: it may be a piece of a longer one)."""
    found = [SPELLED.get(t, t) for t in (t.lower() for t in _TOKEN.findall(text[:limit]))]
    return found[:-1] if len(text) > limit else found


def _holds(prompt: str, part: list[str]) -> bool:
    return f"{_SEP}{_SEP.join(part)}{_SEP}" in prompt


def lost(question: str, prompt: str) -> list[str]:
    """The question's tokens from the first one the prompt does not carry on (the longest start of the question found
    in the prompt as one run ends there); [] when the prompt holds the whole question."""
    asked = tokens(question)
    if not asked:
        return []
    joined = f"{_SEP}{_SEP.join(tokens(prompt, 4 * MAX_CHARS))}{_SEP}"  # room for what precedes the question
    if _holds(joined, asked):
        return []
    lo, hi = 0, len(asked)  # the longest prefix held: containment of a prefix is monotone in its length
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _holds(joined, asked[:mid]) else (lo, mid - 1)
    return asked[lo:]


def asked(row: dict) -> str | None:
    """Everything the row's policy was asked (every message before its reply), else its prompt text."""
    messages = json_obj(row.get("messages"))
    if isinstance(messages, list) and messages:
        return "\n".join(m["content"] for m in messages[:-1] if isinstance(m, dict)
                         and isinstance(m.get("content"), str))
    return row["prompt"] if isinstance(row.get("prompt"), str) else None


def question_checks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The check on main's training rows that recorded their question, and ``main:question_cut`` where any prompt
    loses part of it: rate the share of prompts that do, error above :data:`MOST`; ``evidence["cut"]`` each distinct
    cut (the question's opening, how many of its tokens arrived, what was lost)."""
    read = []
    for row in rows:
        task = json_obj(row.get("task"))
        question = task.get("question") if isinstance(task, dict) else None
        prompt = asked(row)
        if row.get("split", "train") == "train" and isinstance(question, str) and question.strip() and prompt:
            read.append((row, question, lost(question, prompt)))
    if not read:
        return [], []
    cut = [(row, q, gone) for row, q, gone in read if gone]
    n = len(read)
    items = list({q: {"question": q[:160], "kept": len(tokens(q)) - len(gone), "of": len(tokens(q)),
                      "lost": " ".join(gone)[:120]} for _, q, gone in cut}.values())
    detail = (f"{len(cut)} of {n} rendered prompts lose part of their task's question: "
              + "; ".join(f"'{w['question'][:60]}' arrives {w['kept']} of {w['of']} words, without '{w['lost'][:40]}'"
                          for w in items[:3]) if cut else f"all {n} rendered prompts hold their task's question whole")
    check = {"name": NAME, "passed": not cut, "detail": detail[:400]}
    if not cut:
        return [check], []
    rate = len(cut) / n
    examples = [example(row) | {"prompt": f"lost: {' '.join(gone)}"[:160]} for row, _, gone in cut[:EXAMPLES]]
    return [check], [{"name": MODE, "source": "main_checks", "severity": "error" if rate > MOST else "warning",
                      "rate": rate, "message": f"main fails the {NAME} check: {detail}"[:400], "examples": examples,
                      "evidence": {"cut": items[:20], "rows": n}}]

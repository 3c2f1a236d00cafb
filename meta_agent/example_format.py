"""Worked examples whose reply does not end on the line the verifier reads (issue 44): ``main:example_format``.

A prompt asks for ``Answer: <number>`` and shows an example whose reply ends otherwise (``125 + 250 = 375, so the
result is 375.``, a shot ``A: 6 * 7 = 42``, ``The answer is 42.``): a small policy imitates the example, not the
instruction, and most replies carry no final answer the verifier reads.  The digest names only the generic
``no_final_answer``, and a recipe asking for the line again finds it already asked.  Here trusted code reads main's
rendered prompts (archive rows: the sandbox's output, read as bounded text) for examples and their replies:

- an example opens on a heading line (``Example:``, ``Worked example:``, ``For instance:``, ``Example 2:``) or a
  question line (``Question:``, ``Q:``, ``Problem:``); a question line right after a heading is the same example;
- its reply is what follows a reply label (``Reply:``, ``Solution:``, ``Working:``, ``A:``), else what follows the
  question (or the heading); it ends at the next example, at a blank line (an ``Answer:`` line right after the blank
  still belongs to it), and before any line of template code or with a ``<...>`` placeholder (an instruction);
- a reply is judged only where it reaches a value: it states a result (``<expression> = <value>``) or its last line
  ends on a number;
- it is **read** where the verifier's own extraction (``domains.math_answers.extract_final_answer``) finds a final
  answer in it that is one number (or ``x = 7``), as the verifier compares it with a numeric gold.

Each unread example carries its own value: the last number of its reply (a stated result counted at its computed
value), where neither its arithmetic's last result nor the question it restates disagrees; else None, with why.

    unread_examples(text)             # [{"line": "125 + 250 = 375, so the result is 375.", "value": "375", ...}]
    checks, findings = example_format_checks(rows)   # main:example_format where main's prompts carry one
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

from domains.math_answers import extract_final_answer, parse_number
from meta_agent.example_checks import (
    ARITH, BINARY, MAX_PROMPT_CHARS, QUESTION, normalised, read_rows, rows_check, shown, statements, value_of)

NAME = "example_format"
MODE = "main:" + NAME
HEADING = re.compile(r"^\W*(?:[\w'’-]+\s+){0,3}?(?:examples?|sample|demonstration|instance|like this|e\.g\.)\b"
                     r"[^:\n]{0,40}:", re.I)
REPLY = re.compile(r"^\W*(?:(?:reply|response|solution|working|assistant|output)\s*[:.)]|a\s*:)\s*", re.I)
_NUMBER = re.compile(r"-?\d[\d_]*(?:\.\d+)?(?:/\d+(?!\d|\.\d))?")
_ENDS_ON_NUMBER = re.compile(r"\d[\s.!)*\"'”`$]*$")
_ANSWER_LINE = re.compile(r"^\W*answer\s*:", re.I)
OPENS = re.compile(QUESTION.pattern + r"|^\W*(?:input|user|human)\s*\d*\s*:", re.I)
"""A line opening an example's question (``Question:``, ``Q:``, ``Problem 2:``, ``Input:``)."""
_INSTRUCTION = re.compile(r"\{\{|\{%|<[^<>\n]*>")
"""Template code or a placeholder: an instruction or the task, never an example's reply."""


class Example(NamedTuple):
    """One example of a prompt: its question line and its reply, as (line index, text) pairs."""

    question: str
    reply: list[tuple[int, str]]


def examples(lines: list[str]) -> list[Example]:
    """Every example of ``lines`` (module docstring) with a non-empty reply."""
    out: list[Example] = []
    cur: dict | None = None

    def close() -> None:
        if cur is not None:
            body = cur["body"][cur["label"]:] if cur["label"] is not None else cur["body"]
            if any(text.strip() for _, text in body):
                out.append(Example(cur["question"], body))

    for i, raw in enumerate(lines):
        line = raw.strip()
        if _INSTRUCTION.search(line):
            close()
            cur = None
            continue
        heading, question = HEADING.match(line), OPENS.match(line)
        if heading and re.search(r"answer\s*:$", heading.group(), re.I):
            heading = None  # "For example, ... write Answer: 12.": an instruction showing the line, no example
        if heading or question:
            if question and not heading and cur is not None and cur["heading"] and not cur["body"] \
                    and not cur["question"]:
                _asked(cur, i, line)  # the heading's own question
                continue
            close()
            cur = {"heading": bool(heading), "question": "", "body": [], "label": None, "gap": False}
            rest = line[heading.end():].strip() if heading else line
            if OPENS.match(rest):
                _asked(cur, i, rest)
            elif rest:
                cur["body"].append((i, rest))
            continue
        if cur is None:
            continue
        if not line:
            cur["gap"] = cur["gap"] or bool(cur["body"][cur["label"] or 0:])
            continue
        if cur["gap"]:
            if _ANSWER_LINE.match(line) and re.search(r"\d", line):
                cur["body"].append((i, line))  # the example's answer line, a blank line below its working
            close()
            cur = None
            continue
        label = REPLY.match(line)
        if label and cur["label"] is None:
            cur["label"] = len(cur["body"])
            line = line[label.end():].strip() if not _ANSWER_LINE.match(line) else line
            if not line:
                continue
        cur["body"].append((i, line))
    close()
    return out


_INLINE_REPLY = re.compile(r"(?<=[?.!])\s+(?:(?P<label>a|reply|solution|output)\s*:\s*|(?=answer\s*:))", re.I)


def _asked(cur: dict, i: int, text: str) -> None:
    """``text`` as the example's question, and a reply on its own line after it (``Q: 5 + 6? A: 11``) as its reply."""
    m = _INLINE_REPLY.search(text)
    cur["question"] = text[:m.start()] if m else text
    if m and text[m.end():].strip():
        cur["label"] = len(cur["body"])
        cur["body"].append((i, text[m.end():].strip()))


def reads(reply: str) -> bool:
    """Whether the verifier reads a final answer from ``reply`` that is one number (or ``x = 7``)."""
    answer = extract_final_answer(reply)
    if answer is None:
        return False
    return parse_number(answer, lowest_terms=False) is not None or re.fullmatch(
        r"[A-Za-z]\s*=\s*-?\d[\d,]*(?:\.\d+)?", answer) is not None


def reaches_value(reply: list[tuple[int, str]]) -> bool:
    """Whether a reply states a result or its last line ends on a number (a reply, not a question or an aside)."""
    texts = [normalised(t) for _, t in reply]
    return any(statements(t) for t in texts) or bool(texts and _ENDS_ON_NUMBER.search(texts[-1].rstrip()))


def own_value(question: str, reply: list[tuple[int, str]]) -> tuple[Fraction | None, str]:
    """(the value the example reaches, "") or (None, why not): the reply's last number (a stated result at its
    computed value), agreeing with its arithmetic's last result and the value of the question it restates."""
    last = None
    for _, text in reversed(reply):
        line = normalised(text)
        numbers = list(_NUMBER.finditer(line))
        if not numbers:
            continue
        found, m = statements(line), numbers[-1]
        inside = found and found[-1].span[0] <= m.start() < found[-1].span[1] + 1
        last = found[-1].computed if inside else value_of(m.group())
        break
    if last is None:
        return None, "its reply reaches no number"
    results = [s.computed for _, t in reply for s in statements(normalised(t))]
    if results and results[-1] != last:
        return None, f"its last number {shown(last)} is not its arithmetic's result {shown(results[-1])}"
    q = normalised(question)
    runs = [r.strip() for r in re.findall(ARITH + "+", q[QUESTION.match(q).end():] if QUESTION.match(q) else q)
            if BINARY.search(r)]
    asked = [v for r in runs if (v := value_of(r)) is not None]
    if len(asked) == 1 and asked[0] != last:
        return None, f"its last number {shown(last)} is not the value of its question, {shown(asked[0])}"
    return last, ""


def unread_examples(text: str) -> list[dict]:
    """Each example of ``text`` whose reply reaches a value the verifier reads no final answer of: ``line`` (the
    reply's last line), ``question``, ``value`` (its own value, shown; None where it has none), ``why`` (why not),
    ``index`` (the reply's last line's index in ``text``)."""
    lines = text[:MAX_PROMPT_CHARS].split("\n")
    out = []
    for ex in examples(lines):
        if not reaches_value(ex.reply) or reads("\n".join(t for _, t in ex.reply)):
            continue
        value, why = own_value(ex.question, ex.reply)
        out.append({"line": lines[ex.reply[-1][0]].strip()[:200], "question": ex.question[:120],
                    "value": None if value is None else shown(value), "why": why,
                    "index": ex.reply[-1][0]})
    return out


def example_format_checks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The check on main's training rows (the prompts main's templates rendered), and ``main:example_format``
    (error) where any shows an example whose reply ends off the verifier's line: rate the share of rendered prompts
    carrying one, ``evidence["found"]`` each such example once (``role``, ``line``, ``question``, ``value``)."""
    n, carrying = read_rows(rows, lambda text: [{k: w[k] for k in ("line", "question", "value")}
                                                for w in unread_examples(text)])
    return rows_check(NAME, "error", n, carrying, "show an example whose reply ends on no line the verifier reads "
                      "as its answer", lambda w: f"'{w['line'][:80]}' (its value {w['value']})")


__all__ = ["MODE", "NAME", "example_format_checks", "examples", "own_value", "reads", "unread_examples"]

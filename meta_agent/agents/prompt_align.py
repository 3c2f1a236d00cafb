"""Prompt edits that align the answer line a prompt asks for with the one the verifier reads, and put it last.

The math verifier reads a number on the final ``Answer:`` line (the form the final-answer recipe asks for,
``Answer: <number>``).  A prompt can ask for that line and still ask for a form the verifier cannot read (a
placeholder describing something else: words, a numeral system, units; a worked example whose answer line is not a
number), or ask for it *first* with the working after it: the answer is committed before any working is written,
and under a short budget the working is what gets cut.  The edit is built from the prompt's own lines, never from a
known text:

- a placeholder on an ``Answer:`` line other than ``<number>`` becomes ``<number>``;
- an example's ``Answer:`` line with no digit in it takes the value of the question the example restates, else the
  last number of its working (``meta_agent.example_checks.expected_answer``: never a number of the question's own
  line), or is dropped where there is neither;
- an instruction to start with the ``Answer:`` line and give the working after it asks for the working first and
  ends with the line (``Begin with "Answer: <number>" and then show your working.`` ->
  ``Show your working, then end with "Answer: <number>".``);
- an example's ``Answer:`` line with working below it in the same paragraph moves below that working.

    system, user = aligned(system_text), aligned(user_text)   # unchanged texts: nothing to align
"""

from __future__ import annotations

import re

from meta_agent.example_checks import (
    ANSWER_FIRST, EXAMPLE_ANSWER, answers_before_working, asks_first, expected_answer, shown)

__all__ = ["PLACEHOLDER", "aligned", "answer_last"]

PLACEHOLDER = "<number>"
_PLACEHOLDER = re.compile(r"(Answer:\s*)<[^<>\n]*>")


def _working_first(m: re.Match) -> str:
    """An answer-first instruction, reworded to ask for the working and end with the line."""
    if not asks_first(m):
        return m.group()
    rest = m.group("rest").strip()
    if m.group("then").lower() == "followed by":
        rest = "give " + rest
    if m.group("lead")[:1].isupper():
        rest = rest[:1].upper() + rest[1:]
    return f"{rest}, then end with {m.group('spec')}."


def answer_last(text: str | None) -> str | None:
    """``text`` asking for the working before the Answer: line: each answer-first instruction reworded, each
    example's Answer: line moved below its working (``meta_agent.example_checks.answer_first`` finds none after)."""
    if text is None:
        return None
    lines = ANSWER_FIRST.sub(_working_first, text).split("\n")
    for i, j in reversed(answers_before_working(lines)):
        lines[i:j] = lines[i + 1:j] + [lines[i]]
    return "\n".join(lines)


def aligned(text: str | None) -> str | None:
    """``text`` with every ``Answer:`` placeholder and worked answer line in the form the verifier reads, and the
    working asked for before the line."""
    if text is None:
        return None
    text = _PLACEHOLDER.sub(lambda m: m.group(1) + PLACEHOLDER, text)
    out: list[str] = []
    for line in text.split("\n"):
        m = EXAMPLE_ANSWER.match(line)
        value = m.group(2).strip().strip('".') if m else ""
        if not m or not value or re.search(r"\d", value) or "{{" in value:
            out.append(line)
            continue
        worked = expected_answer(out + [line], len(out), any_number=True)
        if worked is not None:
            out.append(m.group(1) + shown(worked))
        # no question or working above it to take the value from: the line goes
    return answer_last("\n".join(out))

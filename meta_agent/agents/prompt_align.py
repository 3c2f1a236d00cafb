"""Prompt edits that align the answer line a prompt asks for with the one the verifier reads.

The math verifier reads a number on the final ``Answer:`` line (the form the final-answer recipe asks for,
``Answer: <number>``).  A prompt can ask for that line and still ask for a form the verifier cannot read: a
placeholder describing something else (words, a numeral system, units), or a worked example whose answer line is
not a number.  The edit is built from the prompt's own lines, never from a known text:

- a placeholder on an ``Answer:`` line other than ``<number>`` becomes ``<number>``;
- an example's ``Answer:`` line with no digit in it takes the last number of the line of working above it (the
  example's own result), or is dropped where there is none.

    system, user = aligned(system_text), aligned(user_text)   # unchanged texts: nothing to align
"""

from __future__ import annotations

import re

__all__ = ["PLACEHOLDER", "aligned"]

PLACEHOLDER = "<number>"
_PLACEHOLDER = re.compile(r"(Answer:\s*)<[^<>\n]*>")
_EXAMPLE = re.compile(r"^([ \t]*Answer:[ \t]*)([^\n<]*)$", re.M)
_NUMBER = re.compile(r"[+-]?\d+(?:[./]\d+)?")


def aligned(text: str | None) -> str | None:
    """``text`` with every ``Answer:`` placeholder and worked answer line in the form the verifier reads."""
    if text is None:
        return None
    text = _PLACEHOLDER.sub(lambda m: m.group(1) + PLACEHOLDER, text)
    lines = text.split("\n")
    out: list[str] = []
    for line in lines:
        m = _EXAMPLE.match(line)
        value = m.group(2).strip().strip('".') if m else ""
        if not m or not value or re.search(r"\d", value) or "{{" in value:
            out.append(line)
            continue
        worked = next((found[-1] for prev in reversed(out) if prev.strip() and (found := _NUMBER.findall(prev))),
                      None) if out and out[-1].strip() else None
        if worked is not None:
            out.append(m.group(1) + worked)
        # no working above it to take the number from: the line goes
    return "\n".join(out)

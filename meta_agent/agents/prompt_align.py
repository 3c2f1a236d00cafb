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

from meta_agent.example_checks import expected_answer, shown

__all__ = ["PLACEHOLDER", "aligned"]

PLACEHOLDER = "<number>"
_PLACEHOLDER = re.compile(r"(Answer:\s*)<[^<>\n]*>")
_EXAMPLE = re.compile(r"^([ \t]*Answer:[ \t]*)([^\n<]*)$", re.M)
_LABEL = re.compile(r"^\W*(?:question|problem|task|q|example|sample)\b.*:|^[^:]*:\s*$", re.I)
_SPEC = r'(?:(?:the|a|your)\s+)?(?:final\s+)?(?:line\s+)?(?:"Answer:\s*<[^<>\n]*>"|Answer:\s*<[^<>\n]*>)'
_FIRST = re.compile(
    r"(?P<lead>\b(?:(?:start|begin|open|lead)(?:\s+\w+){0,2}?\s+with|(?:first\s+)?(?:put|give|write|place|state|"
    r"print)(?:\s+(?:down|out))?)\s+)(?P<spec>" + _SPEC + r")(?P<first>\s+first)?"
    r"(?P<mid>\s*[,;]?\s*(?:and\s+)?(?P<then>then|afterwards|after that|after it|after this|followed by)\s*,?\s*)"
    r"(?P<rest>[^.;\n]+)(?P<end>[.;]?)", re.I)


def _working_first(m: re.Match) -> str:
    """An answer-first instruction, reworded to ask for the working and end with the line."""
    lead, rest = m.group("lead"), m.group("rest").strip()
    ordered = re.match(r"(?:start|begin|open|lead)\b", lead, re.I) or m.group("first") or lead.lower().startswith(
        "first")
    if not ordered:
        return m.group()
    if m.group("then").lower() == "followed by":
        rest = "give " + rest
    if lead[:1].isupper():
        rest = rest[:1].upper() + rest[1:]
    return f"{rest}, then end with {m.group('spec')}."


def _answer_last(lines: list[str]) -> list[str]:
    """Each example ``Answer:`` line that has working below it in its paragraph, moved below that working."""
    out = list(lines)
    i = 0
    while i < len(out):
        j = i + 1
        if _EXAMPLE.match(out[i]) and "{{" not in out[i]:
            while j < len(out) and out[j].strip() and not _LABEL.match(out[j]) and not _EXAMPLE.match(out[j]):
                j += 1
            if j > i + 1 and any(re.search(r"\d", line) for line in out[i + 1:j]):
                out[i:j] = out[i + 1:j] + [out[i]]
        i = j
    return out


def aligned(text: str | None) -> str | None:
    """``text`` with every ``Answer:`` placeholder and worked answer line in the form the verifier reads, and the
    working asked for before the line."""
    if text is None:
        return None
    text = _PLACEHOLDER.sub(lambda m: m.group(1) + PLACEHOLDER, text)
    text = _FIRST.sub(_working_first, text)
    out: list[str] = []
    for line in text.split("\n"):
        m = _EXAMPLE.match(line)
        value = m.group(2).strip().strip('".') if m else ""
        if not m or not value or re.search(r"\d", value) or "{{" in value:
            out.append(line)
            continue
        worked = expected_answer(out + [line], len(out), any_number=True)
        if worked is not None:
            out.append(m.group(1) + shown(worked))
        # no question or working above it to take the value from: the line goes
    return "\n".join(_answer_last(out))

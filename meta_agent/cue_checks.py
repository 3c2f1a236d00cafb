"""Does the prompt leave the answer's format to a cue?  main's rendered prompts read with the replies (issue 44).

A template written for a base model ends on a cue the reply is meant to continue (``Answer:``, ``Final answer:``,
``A:``, ``The answer is``): the tag the verifier reads sits in the prompt, so the reply is a bare value and carries
no final answer.  Or the prompt asks for the answer in a form the verifier's line reading does not use (in bold).
The prompt's text mentions a format, so a recipe that asks "does the template ask for the line?" reads yes; the
replies say otherwise.  Decided from the replies and from where the format sits in the rendered prompt, never from
a template's wording:

- the replies: the share the verifier found no final answer in (``missing``), and of those, the share whose value
  would be right on the verifier's line (``right_unread``: the reply's first line, or a value it wraps in markup
  or leads with a marker alone on its line, ``#### 7``);
- the prompt: its last line is unfinished (ends on a label or a sentence without its end, not the question's own
  text): a **trailing cue** (``cue``, the label's shots, ``shots``: earlier lines under the same label the verifier
  does not read); else the right-but-unread replies wrap their value the same way (``form``, e.g. ``**``) while the
  prompt's last line does not show the verifier's line to write: an **answer form** the prompt asked for.

``main:answer_cue`` is named where most replies carry no final answer (more than :data:`MOST_MISSING`) and one of the
two causes is found; the seed, which asks for the line last as an instruction, is never named for its untrained
policy's untagged replies.  Trusted code on archive rows (the sandbox's output as bounded text); the math verifier
re-reads candidate values.

    checks, findings = answer_cue_checks(rows)   # main:answer_cue, with evidence["cause"], ["cue"], ["form"]
"""

from __future__ import annotations

import re
from collections import Counter

from domains.math import MathDomain
from domains.math_answers import extract_final_answer
from meta_agent.digest_rows import example, has_no_final_answer, json_obj
from meta_agent.question_checks import asked

NAME = "answer_cue"
MODE = "main:" + NAME
EXAMPLES = 3
MOST_MISSING = 0.5
"""Above this share of replies with no final answer, a cue or form in the prompt is the likely cause."""
MIN_ROWS = 4
MAX_CHARS = 4000
"""The most of a reply's text read (hostile text: bounded)."""
MAX_VALUE_CHARS = 40
"""A reply's first line read whole as a value only up to this length (a value, not a sentence)."""
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_LINE_ASKED = re.compile(r"(?i)\banswer\s*:\s*<[^<>\n]*>|[\"'“]\s*answer\s*:[^\"'”\n]*[\"'”]")
"""The verifier's line shown as a line to write: ``Answer: <number>``, or quoted (``"Answer: 7"``)."""
_WRAP = re.compile(r"(?P<open>[^\w\s]{1,3})(?P<value>[-+]?\d[\d,./]*)(?P<close>[^\w\s]{1,3})")
"""A value wrapped in markup: ``**7**``, ``__7__``, ``[7]``, ``$7$``."""
_LEAD = re.compile(r"(?m)^[ \t]*(?P<lead>[^\w\s]{2,6})[ \t]*(?P<value>[-+]?\d[\d,./]*)[ \t]*$")
"""A value alone on its line after a marker of its own: ``#### 7``, ``=> 7`` (a form as much as a wrapping)."""


FORM_LINE = re.compile(r"([^\W\d][\w ]{0,30}?\s*:)\s*<[^<>\n]*>")
"""A line that is only a label and its placeholder (``Answer: <number>``): a form shown for the reply to fill."""


def trailing_cue(prompt: str, question: str) -> str | None:
    """The cue a rendered prompt ends on, or None: its last line's unfinished part (after the question, after the
    last finished sentence) when it ends on a label (``:``, ``=``), an opened bracket or ``$``, or a word; a last
    line that is only a label and its placeholder (``Answer: <number>``) ends on that label."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    q = question.strip()
    if q and q in last:
        last = last[last.rindex(q) + len(q):].strip()
    elif q and q.endswith(last):  # the question's own last line (it may end on ':' or '=')
        return None
    if (form := FORM_LINE.fullmatch(last)) is not None:  # a bare "Answer: <number>" is a cue to fill in, not a
        return form.group(1)  # request: the reply continues it with a value
    tail = _SENTENCE_END.split(last)[-1].strip()
    if not tail or tail[-1] in ".!?\"')]}>":
        return None
    return tail if tail.endswith((":", "=", "(", "[", "{", "$")) or re.search(r"\w$", tail) else None


def asks_last(prompt: str) -> bool:
    """Whether a rendered prompt's last line shows the verifier's line as the line to write (the seed's ``End with
    the line "Answer: <number>".``): replies that still wrap their value otherwise do so of the policy's habit, and
    asking again is no repair."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    return bool(lines) and _LINE_ASKED.search(lines[-1]) is not None


def cue_label(cue: str | None) -> str | None:
    """The label of a ``<label>:`` cue (``A`` of ``A:``), else None."""
    m = re.fullmatch(r"([^\W\d][\w ]{0,30}?)\s*:", cue or "")
    return m.group(1) if m else None


def unread_shots(text: str, label: str, reads) -> list[str]:
    """Lines of ``text`` under ``label`` that give a value the verifier's line reading does not read (``reads``:
    whether a line would be read as a final answer)."""
    pattern = re.compile(rf"^[ \t]*{re.escape(label)}[ \t]*:[ \t]*(\S.*)$", re.M)
    return [m.group(0).strip() for m in pattern.finditer(text) if not reads(m.group(0))]


def _candidates(reply: str) -> list[tuple[str, str | None]]:
    """Values a reply states, each with the markup it wraps it in (None): its first line, its last number, and
    every wrapped value."""
    text = reply[:MAX_CHARS]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    out: list[tuple[str, str | None]] = []
    if lines:
        if len(lines[0]) <= MAX_VALUE_CHARS:
            out.append((lines[0], None))
        numbers = re.findall(r"[-+]?\d[\d,./]*", lines[0])
        if numbers:
            out.append((numbers[-1].rstrip("./,"), None))
    out += [(m.group("value").rstrip("./,"), m.group("open")) for m in _WRAP.finditer(text)
            if m.group("open") == m.group("close")[::-1] or m.group("open") == m.group("close")]
    return out + [(m.group("value").rstrip("./,"), m.group("lead")) for m in _LEAD.finditer(text)]


def answer_cue_checks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The check on main's math training rows with a verifier record and a rendered prompt, and ``main:answer_cue``
    where most replies carry no final answer and the prompt ends on a cue or asked for a form the verifier does not
    read: rate the share of replies with no final answer, error above :data:`MOST_MISSING`."""
    domain = MathDomain()
    read = []
    for row in rows:
        task = json_obj(row.get("task"))
        question = task.get("question") if isinstance(task, dict) else None
        prompt, missing = asked(row), has_no_final_answer(row)
        if row.get("split", "train") == "train" and row.get("domain", "math") == "math" and prompt \
                and missing is not None and isinstance(row.get("response"), str):
            read.append((row, str(question or ""), prompt, missing))
    if len(read) < MIN_ROWS:
        return [], []
    n = len(read)
    unread = [(row, q, p) for row, q, p, missing in read if missing]
    right, forms = [], Counter()
    for row, _, _ in unread:
        truth = json_obj(row.get("ground_truth"))
        hits = [form for value, form in _candidates(row["response"])
                if domain.verify(str(row.get("data_source", "")), f"Answer: {value}", truth)[0] >= 0.5]
        if hits:
            right.append(row)
            forms.update({f for f in hits if f is not None})
    cues = Counter(c for _, q, p in unread if (c := trailing_cue(p, q)) is not None)
    cue, cued = cues.most_common(1)[0] if cues else (None, 0)
    form, formed = forms.most_common(1)[0] if forms else (None, 0)
    missing_share = len(unread) / n
    told = sum(asks_last(p) for _, _, p in unread)
    cause = ("trailing_cue" if cued * 2 > len(unread) else
             "answer_form" if right and formed * 2 > len(right) and told * 2 <= len(unread) else None)
    label = cue_label(cue) if cause == "trailing_cue" else None
    shots = sorted({s for _, _, p in unread for s in unread_shots(p, label, lambda line: extract_final_answer(line)
                                                                  is not None)})[:8] if label else []
    evidence = {"cause": cause, "cue": cue if cause == "trailing_cue" else None,
                "form": form if cause == "answer_form" else None, "label": label, "shots": shots,
                "rows": n, "missing": round(missing_share, 4), "right_unread": round(len(right) / n, 4)}
    named = missing_share > MOST_MISSING and cause is not None
    where = (f"the rendered prompts end on the cue {cue!r} ({cued} of them)" if cause == "trailing_cue" else
             f"the right values the replies give are wrapped in {form!r} ({formed} of {len(right)})"
             if cause == "answer_form" else f"the prompts end on no cue, {told} of them on a request for the line, "
             f"and the replies wrap no value alike" if not formed * 2 > len(right) or not right else
             f"the replies wrap their values in {form!r}, but {told} prompts end asking for the line")
    detail = (f"{len(unread)} of {n} replies carry no final answer the verifier reads, {len(right)} of them with a "
              f"value that would be right on its line; {where}")
    check = {"name": NAME, "passed": not named, "detail": detail[:400]}
    if not named:
        return [check], []
    examples = [example(row) for row in (right or [r for r, _, _ in unread])[:EXAMPLES]]
    return [check], [{"name": MODE, "source": "main_checks", "severity": "error", "rate": missing_share,
                      "message": f"main fails the {NAME} check: {detail}"[:400], "examples": examples,
                      "evidence": evidence}]

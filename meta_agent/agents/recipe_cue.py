"""The answer-cue recipe: main's prompts leave the answer's format to a cue -> remove it and ask for the line last.

``main:answer_cue`` (``meta_agent.cue_checks``) is named from the replies (most carry no final answer the verifier
reads) with where the format sits in the rendered prompt: a trailing cue the reply continues (``Answer:``, ``A:``,
``The answer is``), or an answer form the replies wrap their values in (bold).  final-answer-prompt declines such a
prompt, since its text already holds ``Answer:``; this rule works from the finding's evidence instead:

- the cue, where the user template's last line ends on it, goes (the line, or its unfinished tail);
- lines under the cue's label that give a value the verifier does not read (few-shot answers ``A: 5``) become the
  line it does (``Answer: 5``; a line with working keeps it and gains ``Answer: <its last number>``);
- the user template ends with an explicit instruction: the reply ends on ``Answer: <number>``.

Where the cue is not the user template's own text (template code writes it), the rule declines: a repair by hand.
Its effect is on what the policy writes: the search agent previews it by generation, as other prompt edits.

    decision = answer_cue(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

import re

from domains.math_answers import extract_final_answer
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.prompt_align import PLACEHOLDER
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.cue_checks import FORM_LINE, MODE, trailing_cue

RULE = "answer-cue"
TEMPLATES = ("prompts/system.j2", "prompts/user.j2")
INSTRUCTION = (f'End your reply with the line "Answer: {PLACEHOLDER}": only that line is read as your answer. '
               "Write nothing after it.")
_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_LITERAL = re.compile(r"\{\{-?\s*([\"'])((?:(?!\1)[^\\\n])*)\1\s*-?\}\}$")
"""A line's last expression when it only prints a string literal (the cue written by template code)."""


def without_cue(text: str, cue: str) -> str | None:
    """``text`` without the ``cue`` its last line (Jinja comments aside) ends on: the line goes, or only its
    unfinished tail where something precedes the cue (a string literal the line prints last counts as its text,
    ``{{ "Answer:" }}``); None where the last line does not end on it."""
    lines = text.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        line = _COMMENT.sub("", lines[i]).rstrip()
        if not line.strip():
            continue
        if FORM_LINE.fullmatch(line.strip()) and FORM_LINE.fullmatch(line.strip()).group(1) == cue:
            line = line[:line.rindex("<")].rstrip()  # the form line "Answer: <number>": its placeholder goes too
        printed = _LITERAL.search(line)  # a string literal the template prints last: {{ "Answer:" }}
        if not line.endswith(cue) and printed and printed.group(2).rstrip().endswith(cue):
            kept = printed.group(2).rstrip()[:-len(cue)].rstrip()
            line = line[:printed.start()] + (printed.group(0).replace(printed.group(2), kept) if kept.strip() else "")
            lines[i:i + 1] = [line.rstrip()] if line.strip() else []
            return "\n".join(lines)
        if not line.endswith(cue):
            return None
        rest = line[:-len(cue)].rstrip()
        lines[i:i + 1] = [rest] if rest.strip() else []
        return "\n".join(lines)
    return None


def shots_read(text: str, label: str) -> str:
    """``text`` with each line under ``label`` the verifier does not read written as the line it does."""
    def fix(m: re.Match) -> str:
        value = m.group(2).strip()
        if "{{" in value or "{%" in value or extract_final_answer(m.group(0)) is not None:
            return m.group(0)
        if re.fullmatch(r"[-+]?\d[\d,./]*", value):
            return f"{m.group(1)}Answer: {value}"
        numbers = re.findall(r"[-+]?\d[\d,./]*", value)
        return m.group(0) + (f"\n{m.group(1)}Answer: {numbers[-1].rstrip('./,')}" if numbers else "")

    return re.sub(rf"^([ \t]*){re.escape(label)}[ \t]*:[ \t]*(\S.*)$", fix, text, flags=re.M)


def asked_last(f: HarnessFiles, cue: str | None, label: str | None) -> dict[str, str] | str:
    """The templates with ``cue`` gone from the user template's last line, lines under ``label`` written as the
    verifier's line, and the line asked for last; or why not (the cue is not the template's own text)."""
    user = f.user_prompt if f.user_prompt is not None else "{{ question }}\n"
    if cue:
        cut = without_cue(user, cue)
        if cut is None:
            return (f"the rendered prompts end on the cue {cue!r}, but prompts/user.j2's last line does not (template "
                    "code writes it): fix by hand or with the LLM agent")
        user = cut
    files = {}
    for path, old, text in zip(TEMPLATES, (f.system_prompt, f.user_prompt), (f.system_prompt, user)):
        new = shots_read(text, label) if label and text else text
        if path == "prompts/user.j2":
            new = edits._append(new or "", "{# " + edits.marker(RULE) + " #}\n" + INSTRUCTION)
        if new is not None and new != old:
            files[path] = new
    return files


def template_cue(text: str | None) -> str | None:
    """The cue a template's own last line ends on (Jinja comments aside), as :func:`trailing_cue` reads a rendered
    prompt; None where it ends on an instruction, the question or template code."""
    return trailing_cue(_COMMENT.sub("", text or ""), "")


def answer_cue(d: dict, f: HarnessFiles) -> Decision:
    """The cue removed (and its shots written as the verifier's line), the line asked for last."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE]
    if not found:
        return f"no {MODE} finding (the replies write the line the verifier reads, or no cue or form explains why not)"
    ev = found[0].get("evidence") or {}
    user = f.user_prompt if f.user_prompt is not None else "{{ question }}\n"
    if edits.has_marker(user, RULE):
        return f"prompts/user.j2 already ends by asking for the line ({RULE}); asking again is no repair"
    cause, cue, label = ev.get("cause"), ev.get("cue"), ev.get("label")
    files = asked_last(f, cue if cause == "trailing_cue" else None, label)
    if isinstance(files, str):
        return files
    rate = float(found[0].get("rate") or 0.0)
    where = (f"the prompts end on the cue {cue!r}" + (f" and show {len(ev.get('shots') or [])} answer line(s) under "
                                                     f"{label!r} the verifier does not read" if ev.get("shots") else "")
             if cause == "trailing_cue" else f"the replies wrap their answers in {ev.get('form')!r}")
    return Change(
        RULE, f"{RULE}:{cause}", min(1.0, rate), "Remove the answer cue and end the prompt asking for the Answer: line",
        f"{MODE} rate {rate:.3f}: {ev.get('missing')} of replies carry no final answer, {ev.get('right_unread')} with "
        f"a value that would be right on the line; {where}.",
        "The format the verifier reads sits in the prompt (a cue the reply continues) or is asked in another form, so "
        "the reply carries a bare value and no final answer: the verifier and the reward score it 0 whatever it "
        "says. Asked last and explicitly for the line, the reply writes it; the reward is unchanged.",
        ["no_final_answer_rate decrease: the reply writes the line the verifier reads"],
        files, f"{MODE} named", root_cause=True)

"""The worked-example recipe: main's prompts show an example trusted arithmetic disagrees with -> correct or drop it.

``main:worked_example`` (``meta_agent.example_checks``) names each wrong value main's rendered prompts state, with
the value its expression (or the task the example restates) computes.  The edit works on the templates' own text,
re-checked by the same trusted check, and goes one of two ways:

- correct: each wrong value that is a plain number becomes the computed one, the rest of its line as it was;
- drop: where a wrong value cannot be written so (the stated side is an expression; the value has no finite
  decimal), the example's paragraph goes, if it is only an example (no template code, no ``<...>`` placeholder
  that asks for the answer's form).

A template still showing a wrong example after the edit is no repair: the rule declines.  So it does where the rendered
prompts show the wrong example and no template's text does (template code computes it): a repair by hand.  No seed
text is a target: the right value is what the expression computes.

    decision = worked_example(digest, HarnessFiles.read(repo))   # a Change, or why not

``answer-last`` (on ``main:answer_first``) is the same kind of text edit: the prompts asked for the Answer: line
before the working; the edit asks for the working first, re-checked the same way.
"""

from __future__ import annotations

from meta_agent.agents import prompt_align
from meta_agent.agents.recipe_shown import shown_evidence
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.example_checks import ANSWER_FIRST_NAME, MODE, answer_first, corrected, wrong_examples
from meta_agent.example_format import MODE as FORMAT_MODE
from meta_agent.example_format import unread_examples

TEMPLATES = ("prompts/system.j2", "prompts/user.j2")


def dropped(text: str) -> str | None:
    """``text`` without each paragraph (lines between blank ones) that shows a wrong example, or None where such a
    paragraph holds more than an example (template code, a ``<...>`` placeholder)."""
    lines = text.split("\n")
    gone: set[int] = set()
    for w in wrong_examples(text):
        start, end = w.index, w.index
        while start > 0 and lines[start - 1].strip():
            start -= 1
        while end + 1 < len(lines) and lines[end + 1].strip():
            end += 1
        block = "\n".join(lines[start:end + 1])
        if "{{" in block or "{%" in block or "<" in block:
            return None
        gone |= set(range(start, end + 1)) | ({start - 1} if start > 0 and not lines[start - 1].strip() else set())
    return "\n".join(line for i, line in enumerate(lines) if i not in gone)


def _repair(text: str) -> tuple[str, str] | None:
    """(the repaired text, ``correct`` or ``drop``), or None where neither leaves the text clean."""
    fixed = corrected(text)
    if not wrong_examples(fixed):
        return fixed, "correct"
    cut = dropped(fixed)
    return (cut, "drop") if cut is not None and not wrong_examples(cut) else None


def worked_example(d: dict, f: HarnessFiles) -> Decision:
    """The prompt's wrong worked example corrected from trusted arithmetic (or dropped where it cannot be)."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE]
    if not found:
        return f"no {MODE} finding (main's prompts show no worked example trusted arithmetic disagrees with)"
    files, how, fixes = {}, set(), []
    for path, text in zip(TEMPLATES, (f.system_prompt, f.user_prompt)):
        if not text or not (wrong := wrong_examples(text)):
            continue
        repaired = _repair(text)
        if repaired is None:
            return (f"{path} shows {wrong[0].line[:80]!r} ({wrong[0].stated}, computes {wrong[0].computed}) and "
                    "neither correcting the value nor dropping its paragraph leaves the template clean: fix by hand")
        files[path], _ = repaired
        how.add(repaired[1])
        fixes += [f"{w.stated}->{w.computed}" for w in wrong]
    if not files:
        return (f"{MODE} names a wrong example in the rendered prompts that no template's text shows (template code "
                "computes it): fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    verb = "Drop" if how == {"drop"} else "Correct"
    lines = "; ".join(f"{w['line'][:80]!r} computes {w['computed']}" for w in
                      (found[0].get("evidence") or {}).get("found", [])[:4])
    return Change(
        "worked-example", f"worked-example:{'+'.join(sorted(how))}:" + ",".join(sorted(set(fixes))), min(1.0, rate),
        f"{verb} the prompt's worked example that trusted arithmetic disagrees with",
        f"{MODE} rate {rate:.3f}: {lines}.",
        "The worked example is the one reply the policy imitates from its first step; a wrong result or an Answer: "
        "line that disagrees with its working teaches wrong answers the verifier rejects. With the value its "
        "expression computes (or without the example), what the policy imitates is right.",
        ["verified_mean increase: the example the policy imitates computes its result right"],
        files, f"{MODE} named", root_cause=True)


ORDER_MODE = "main:" + ANSWER_FIRST_NAME


def answer_last(d: dict, f: HarnessFiles) -> Decision:
    """main's prompts ask for the Answer: line before the working -> ask for the working first and end with the line
    (``prompt_align.answer_last``: the instruction reworded, each example's Answer: line moved below its working)."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == ORDER_MODE]
    if not found:
        return f"no {ORDER_MODE} finding (main's prompts ask for the working before the Answer: line)"
    files = {path: new for path, text in zip(TEMPLATES, (f.system_prompt, f.user_prompt))
             if text and (new := prompt_align.answer_last(text)) != text}
    left = [w for text in files.values() for w in answer_first(text)]
    if not files or left:
        return (f"{ORDER_MODE} names an answer-first request that the templates' text "
                + ("still shows after the reorder: " + left[0]["line"][:80] if left else "does not show (template "
                   "code writes it)") + ": fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    shown_ = "; ".join(f"{w['kind']}: {w['line'][:80]!r}"
                       for w in (found[0].get("evidence") or {}).get("found", [])[:3])
    return Change(
        "answer-last", "answer-last:" + ",".join(sorted(files)), min(1.0, rate),
        "Ask for the working first and end with the Answer: line", f"{ORDER_MODE} rate {rate:.3f}: {shown_}.",
        "A reply that starts with its Answer: line commits to the answer before any working is written, so the "
        "working cannot inform it; working first, then the line, lets it.",
        ["verified_mean increase: the policy works the task out before it commits to an answer"],
        files, f"{ORDER_MODE} named", root_cause=True)


TEXT_CHECKS = {MODE: ("worked-example", wrong_examples), ORDER_MODE: ("answer-last", answer_first),
               FORMAT_MODE: ("example-format", unread_examples)}
"""Modes whose symptom is the templates' own text, with the rule that remedies each and the trusted reading that,
re-run on a branch's templates, is exact evidence."""


def text_evidence(digest: dict, change: Change) -> str | None:
    """For a change of the rule remedying a named :data:`TEXT_CHECKS` mode: "" when the branch's templates show
    nothing that mode's check finds, else what they still show; None for any other change.  The evidence a
    generation preview cannot give (a few tasks' rates say nothing of an example's arithmetic), as
    ``preview_evidence.config_evidence`` is for the task mix.  (Not hooked up yet: the search agent withholds
    these changes for want of a generation preview's interval.)  ``shown-answer``'s change is re-read the same way
    (``recipe_shown.shown_evidence``: against the support its finding measured)."""
    if (shown_ := shown_evidence(digest, change)) is not None:
        return shown_
    named = [str(m.get("name")) for m in digest.get("failure_modes") or [] if m.get("name") in TEXT_CHECKS
             and TEXT_CHECKS[str(m.get("name"))][0] == change.rule]
    if not named or not set(change.files) & set(TEMPLATES):
        return None
    read = TEXT_CHECKS[named[0]][1]
    left = [f"{path}: {w[0] if isinstance(w, tuple) else w['line']}"[:120] for path in TEMPLATES
            if path in change.files for w in read(change.files[path])]
    return f"the branch's templates still show {left[0]}" if left else ""

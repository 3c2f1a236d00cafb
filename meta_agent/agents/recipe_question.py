"""The whole-question recipe: main's prompts cut the task's question -> print it whole.

``main:question_cut`` (``meta_agent.question_checks``) names rendered prompts that lose part of their task's
question.  The edit works on the templates' own text, never rendered here: every output (``{{ ... }}``) or
assignment (``{% set x = ... %}``) that does anything to the question variable, or to a name set from it, other than
print it (a slice, a subscript, a method, any filter but the lossless ``trim``, ``lower``...) prints the variable
itself, the rest of the template as it was; a ``{% filter %}`` block around the question goes; a ``{% for %}`` over
the question prints it whole instead, and an ``{% if %}`` whose condition reads it keeps, unconditionally, the branch
that prints it; a template that never prints the question gets ``{{ question }}`` at the top of the user prompt.  The
rule declines where the templates' text shows no such use or one is left after the edit: a repair by hand.
No seed text is a target: the variable the runtime passes is.

    decision = whole_question(digest, HarnessFiles.read(repo))   # a Change, or why not
    lossy_uses(template_text)                                     # what of a template's text cuts the question
"""

from __future__ import annotations

import re

from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.question_checks import MODE

TEMPLATES = ("prompts/system.j2", "prompts/user.j2")
VARIABLE = "question"
LOSSLESS = ("trim", "safe", "string", "e", "escape", "lower", "upper", "capitalize", "title")
"""Filters that change no word, number or sign of what they print (case aside)."""
_BLOCK = re.compile(r"\{\{-?(?P<out>.*?)-?\}\}|\{%-?\s*(?P<tag>\w+)(?P<body>.*?)-?%\}", re.S)
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_LOSSLESS = re.compile(r"\|\s*(?:" + "|".join(LOSSLESS) + r")\b(?!\s*\()")
_OPEN = {"(": ")", "[": "]"}


def _names_at(expr: str, names: set[str]) -> list[tuple[int, int]]:
    """(start, end) of each use of a tracked name in ``expr`` outside string literals (not an attribute)."""
    blank = _STRING.sub(lambda m: " " * len(m.group()), expr)
    return [(m.start(), m.end()) for m in re.finditer(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")\b",
                                                      blank)]


def _balanced(expr: str, at: int) -> int:
    """The index past the bracket opened at ``at`` (strings skipped); len(expr) when it never closes."""
    i, close = at, []
    while i < len(expr):
        if (s := _STRING.match(expr, i)) is not None:
            i = s.end()
            continue
        ch = expr[i]
        if ch in _OPEN:
            close.append(_OPEN[ch])
        elif close and ch == close[-1]:
            close.pop()
            if not close:
                return i + 1
        i += 1
    return len(expr)


def _chain_end(expr: str, at: int) -> int:
    """Past the postfix chain after a name ending at ``at``: subscripts, attributes, calls and filters."""
    while True:
        m = re.match(r"\s*", expr[at:])
        i = at + m.end()
        if i < len(expr) and expr[i] in "([":
            at = _balanced(expr, i)
        elif (f := re.match(r"\.\s*\w+|\|(?!\|)\s*\w+(?:\.\w+)*", expr[i:])) is not None:
            at = i + f.end()
        else:
            return at


def _safe(expr: str, names: set[str]) -> bool:
    """Whether ``expr`` prints only string literals and tracked names, joined by ``~``, lossless filters aside."""
    bare = _LOSSLESS.sub("", expr)
    atom = r"(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|" + "|".join(map(re.escape, names)) + ")"
    return re.fullmatch(rf"\s*{atom}(?:\s*~\s*{atom})*\s*", bare) is not None


def _whole(expr: str, names: set[str]) -> str:
    """``expr`` with every postfix chain on a tracked name (and on a parenthesised one) cut back to the name; an
    expression still not :func:`_safe` becomes the first tracked name it uses."""
    for _ in range(20):
        spans = _names_at(expr, names)
        if not spans:
            return expr
        start, end = spans[0] if len(spans) == 1 else next(
            ((s, e) for s, e in spans if _chain_end(expr, e) != e), spans[0])
        stop = _chain_end(expr, end)
        if stop != end:
            expr = expr[:start] + expr[start:end] + expr[stop:]
            continue
        # parentheses around a name alone (never a call's: ``show(question)`` keeps them)
        wrapped = re.sub(r"(?<![\w)\]])\(\s*(" + "|".join(map(re.escape, names)) + r")\s*\)", r"\1", expr)
        if wrapped == expr:
            break
        expr = wrapped
    if _safe(expr, names):
        return expr
    first = _names_at(expr, names)[0]
    return f" {expr[first[0]:first[1]]} "


def _tracked(text: str) -> set[str]:
    """The question variable and every name a ``{% set %}`` assigns from it (to a fixpoint)."""
    names = {VARIABLE}
    for _ in range(10):
        more = {m.group("body").split("=", 1)[0].strip() for m in _BLOCK.finditer(text)
                if m.group("tag") == "set" and "=" in m.group("body")
                and _names_at(m.group("body").split("=", 1)[1], names)}
        if more <= names:
            return names
        names |= {n for n in more if re.fullmatch(r"\w+", n)}
    return names


def lossy_uses(text: str) -> list[str]:
    """Each block of ``text`` that does more to the question (or a name set from it) than print it: an output or
    assignment that is not :func:`_safe`, a ``{% filter %}`` or ``{% for %}`` over it."""
    names = _tracked(text)
    out = []
    for m in _BLOCK.finditer(text):
        tag, body = m.group("tag"), m.group("body") or ""
        if m.group("out") is not None:
            expr = m.group("out")
        elif tag == "set" and "=" in body:
            expr = body.split("=", 1)[1]
        elif tag == "for" and _names_at(body, names):
            out.append(m.group())
            continue
        elif tag == "filter" and _names_at(text[m.end():text.find("endfilter", m.end())], names):
            out.append(m.group())
            continue
        else:
            continue
        if _names_at(expr, names) and not _safe(expr, names):
            out.append(m.group())
    return out


def prints_question(text: str) -> bool:
    names = _tracked(text)
    return any(m.group("out") is not None and _names_at(m.group("out"), names) for m in _BLOCK.finditer(text))


def whole(text: str) -> str:
    """``text`` printing the question whole: each lossy output or assignment cut back to the name, each
    ``{% filter %}`` block around the question opened (its tags dropped)."""
    names = _tracked(text)

    def edit(m: re.Match) -> str:
        if m.group("out") is not None and _names_at(m.group("out"), names) and not _safe(m.group("out"), names):
            return m.group().replace(m.group("out"), _whole(m.group("out"), names), 1)
        body = m.group("body") or ""
        if m.group("tag") == "set" and "=" in body and _names_at(rhs := body.split("=", 1)[1], names) \
                and not _safe(rhs, names):
            return m.group().replace(body, body.split("=", 1)[0] + "= " + _whole(rhs, names).strip() + " ", 1)
        return m.group()

    text = _BLOCK.sub(edit, text)
    for m in reversed(list(re.finditer(r"\{%-?\s*filter\b.*?%\}(?P<inner>.*?)\{%-?\s*endfilter\s*-?%\}", text,
                                       re.S))):
        if _names_at(m.group("inner"), names):
            text = text[:m.start()] + m.group("inner") + text[m.end():]
    return _unbranched(text, names)


_CONTROL = re.compile(r"\{%-?\s*(?P<tag>for|if)\b(?P<head>.*?)-?%\}(?P<inner>(?:(?!\{%-?\s*(?:for|if)\b).)*?)"
                      r"\{%-?\s*end(?P=tag)\s*-?%\}", re.S)
"""An innermost ``{% for %}`` or ``{% if %}`` block (no block of either kind inside it)."""


def _unbranched(text: str, names: set[str]) -> str:
    """``text`` with template logic over the question undone: a ``{% for %}`` over it (its words, a slice) prints it
    whole instead; an ``{% if %}`` whose condition reads it (its length, its words) keeps the branch that prints it,
    unconditionally (or prints it whole where no branch does)."""
    for _ in range(20):
        for m in _CONTROL.finditer(text):
            head = m.group("head")
            if not _names_at(head, names):
                continue
            if m.group("tag") == "for":
                keep = "{{ " + VARIABLE + " }}"
            else:
                branches = re.split(r"\{%-?\s*(?:elif\b.*?|else\s*)-?%\}", m.group("inner"), flags=re.S)
                keep = next((b for b in branches if prints_question(b)), "{{ " + VARIABLE + " }}")
            text = text[:m.start()] + keep + text[m.end():]
            break
        else:
            return text
    return text


def whole_question(d: dict, f: HarnessFiles) -> Decision:
    """The question printed whole where main's rendered prompts cut it."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE]
    if not found:
        return f"no {MODE} finding (main's rendered prompts hold each task's question whole)"
    texts = dict(zip(TEMPLATES, (f.system_prompt, f.user_prompt)))
    files = {p: new for p, t in texts.items() if t and (new := whole(t)) != t}
    after = {p: files.get(p, t) for p, t in texts.items()}
    if not any(t and prints_question(t) for t in after.values()):
        if f.user_prompt is None:
            return "there is no prompts/user.j2 to print the question in (the runtime prints it whole without one)"
        files["prompts/user.j2"] = "{{ " + VARIABLE + " }}\n\n" + files.get("prompts/user.j2", f.user_prompt)
    left = [f"{p}: {u[:80]}" for p, t in files.items() for u in lossy_uses(t)]
    if not files or left:
        return (f"{MODE} names cut questions, and the templates' text " + (
            f"still cuts it after the edit ({left[0]})" if left else "prints the question whole (template logic cuts "
            "it: a condition or a loop)") + ": fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    shown = "; ".join(f"'{w.get('question', '')[:50]}' without '{w.get('lost', '')[:30]}'"
                      for w in (found[0].get("evidence") or {}).get("cut", [])[:3])
    return Change(
        "whole-question", "whole-question:" + ",".join(sorted(files)), min(1.0, rate),
        "Print the task's question whole in the prompt", f"{MODE} rate {rate:.3f}: {shown}.",
        "A policy asked part of a task cannot solve it: the operands or the instruction it lost are in no prompt, "
        "so every group of it is flat and unsolved whatever the knobs. Printed whole, the task is what is asked.",
        ["verified_mean increase: the policy is asked the whole task"], files, f"{MODE} named", root_cause=True)


def question_evidence(digest: dict, change: Change) -> str | None:
    """For a change of this rule on a named ``main:question_cut``: "" when the branch's templates print the question
    and cut it nowhere in their text, else what is left; None for any other change (the evidence a generation
    preview cannot give: a few tasks' rates say nothing of whether the question arrives)."""
    if change.rule != "whole-question" or not any(m.get("name") == MODE for m in digest.get("failure_modes") or []):
        return None
    left = [f"{p}: {u[:80]}" for p in TEMPLATES if p in change.files for u in lossy_uses(change.files[p])]
    if left:
        return f"the branch's templates still cut the question: {left[0]}"
    return "" if any(prints_question(t) for t in change.files.values()) or "prompts/user.j2" not in change.files \
        else "the branch's user template does not print the question"

"""The example-format recipe: main's prompts show an example whose reply ends off the verifier's line -> end it there.

``main:example_format`` (``meta_agent.example_format``) names each example of main's rendered prompts whose reply
reaches a value the verifier reads no final answer of, with the example's own value (its reply's last number, a
stated result at its computed value, checked against its arithmetic and the question it restates).  The edit works
on the templates' own text: each such reply ends on ``Answer: <its own value>``, a line below its last (the working
and prose above stay), or that line itself where it is an ``Answer:`` line the verifier cannot read
(``Answer: three hundred seventy-five``).  The result is re-read by the same check and by the worked-example and
answer-order checks: where an example is left unread, or a check finds what it did not before, the rule declines,
as it does where an example has no value of its own (its prose and its arithmetic disagree) or no template's text
shows it (template code writes it): a repair by hand.  No seed text is a target: the value is the example's own.

    decision = example_format(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

import re

from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.example_checks import answer_first, wrong_examples
from meta_agent.example_format import MODE, unread_examples

RULE = "example-format"
TEMPLATES = ("prompts/system.j2", "prompts/user.j2")
_ANSWER_LINE = re.compile(r"^(\s*)answer\s*:", re.I)


_LABELLED = re.compile(r"^(\s*)([^\w\s<{}]{1,6}|[A-Za-z][A-Za-z ]{0,23}[:=>-]+)\s*(-?[\d.,/]+)\s*\.?\s*$")
"""A line that is a label and a value alone (``#### 375``, ``Final: 42``, ``=> 54``): the label's own answer line."""


def label_of(line: str, value: str) -> str | None:
    """The label of ``line`` where it is that label and ``value`` alone (and not the verifier's ``Answer:``)."""
    m = _LABELLED.match(line)
    if not m or _ANSWER_LINE.match(line) or m.group(3).rstrip(".") != value:
        return None
    return m.group(2).strip()


def asked_as(text: str, labels: set[str]) -> str:
    """``text`` with each instruction asking for ``<label> <placeholder>`` (a label an example ended on) asking
    for the verifier's ``Answer: <number>``; a label with no placeholder after it is text, left."""
    for label in sorted(labels, key=len, reverse=True):
        text = re.sub(re.escape(label) + r"[ \t]*<[^<>\n]*>", "Answer: <number>", text)
    return text


def ended(text: str, labels: set[str] | None = None) -> tuple[str, list[str]] | str:
    """(``text`` with each unread example's reply ending on the verifier's line, the values written), or why not.

    An example whose last line is a label and its value alone (or an ``Answer:`` line the verifier cannot read) ends
    on ``Answer: <value>`` in that line's place; the label goes into ``labels`` (for :func:`asked_as`)."""
    unread = unread_examples(text)
    if missing := [w for w in unread if w["value"] is None]:
        return f"the example ending {missing[0]['line'][:80]!r} has no value of its own: {missing[0]['why']}"
    lines = text.split("\n")
    for w in sorted(unread, key=lambda w: w["index"], reverse=True):
        last = lines[w["index"]]
        indent = re.match(r"\s*", last).group()
        label = label_of(last, str(w["value"]))
        if _ANSWER_LINE.match(last) or label:
            lines[w["index"]] = f"{indent}Answer: {w['value']}"
            if labels is not None:  # an unread Answer: line's placeholder describes the unread form too
                labels.add(label or "Answer:")
        else:
            lines.insert(w["index"] + 1, f"{indent}Answer: {w['value']}")
    out = "\n".join(lines)
    if left := unread_examples(out):
        return f"the example ending {left[0]['line'][:80]!r} still ends off the verifier's line"
    if len(wrong_examples(out)) > len(wrong_examples(text)) or len(answer_first(out)) > len(answer_first(text)):
        return "the added Answer: line would disagree with the example's working or stand above working"
    return out, [w["value"] for w in unread]


def example_format(d: dict, f: HarnessFiles) -> Decision:
    """The prompt's examples whose reply ends off the verifier's line ended on ``Answer: <their own value>``."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE]
    if not found:
        return f"no {MODE} finding (every example of main's prompts ends on a line the verifier reads)"
    files, values, labels = {}, [], set()
    texts = dict(zip(TEMPLATES, (f.system_prompt, f.user_prompt)))
    for path, text in texts.items():
        if not text or not unread_examples(text):
            continue
        done = ended(text, labels)
        if isinstance(done, str):
            return f"{path}: {done}: fix by hand or with the LLM agent"
        files[path], written = done
        values += written
    for path, text in texts.items():  # an instruction asking for the label an example ended on asks for Answer:
        if text and (asked := asked_as(files.get(path, text), labels)) != files.get(path, text):
            files[path] = asked
    if not files:
        return (f"{MODE} names an example of the rendered prompts that no template's text shows (template code "
                "writes it): fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    lines = "; ".join(f"{w['line'][:80]!r} (its value {w['value']})"
                      for w in (found[0].get("evidence") or {}).get("found", [])[:4])
    return Change(
        RULE, f"{RULE}:" + ",".join(sorted(set(values))), min(1.0, rate),
        "End the prompt's examples on the Answer: line the verifier reads",
        f"{MODE} rate {rate:.3f}: {lines}.",
        "The example is the reply a policy imitates from its first step, before the instruction: an example that ends "
        "in prose (or on a line the verifier does not read) teaches replies with no final answer, whatever the "
        "instruction asks. Ending each example on the verifier's line with the example's own value shows the format "
        "the instruction asks for.",
        ["no_final_answer_rate decrease: the replies imitate an example ending on the verifier's line"],
        files, f"{MODE} named", root_cause=True)

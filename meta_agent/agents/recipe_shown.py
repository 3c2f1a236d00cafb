"""The shown-answer recipe: main's prompts show answers the task mix produces -> move each example out of the golds.

``main:shown_answer`` (``meta_agent.example_shown``) names the values main's rendered prompts show as answers that are
golds of its mix, with the support the trusted generator measured (the distinct golds drawn and a ``bound`` beyond
the largest).  The edit works on the templates' own text, one example (a block of lines between blank ones; a
Jinja string's ``\\n`` counts as a line break) at a time:

- the arithmetic that reaches the shown value (a run of plain arithmetic in the example whose value it is: the
  working's ``9 - 4``, else the question's) is scaled: every number of it times the least power of ten that puts
  its value beyond the bound and outside the support; each of those numbers and the value become their scaled
  selves wherever the example writes them (in digits, or as a word up to twenty: ``two times four``), so its
  question, working and Answer: line still agree;
- a value in a block that writes no arithmetic (an instruction's ``a line like "Answer: 12"``) is scaled alone;
- an example no such arithmetic reaches (or whose numbers would need two values) is dropped, if it is only an
  example (no template code, no ``<...>`` placeholder).

The result is re-read by the same trusted readings (no shown value in the support, no worked example trusted
arithmetic disagrees with); where it is not clean, or no template's text shows the value (template code computes
it), the rule declines: a repair by hand.  No seed text is a target: the values come from the measured support.

    decision = shown_answer(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

import re
from fractions import Fraction

from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.example_checks import ARITH, BINARY, normalised, shown, value_of, wrong_examples
from meta_agent.example_shown import MODE, results, shown_answers, support_of

RULE = "shown-answer"
TEMPLATES = ("prompts/system.j2", "prompts/user.j2")
MAX_POWER = 12
MIN_HITS = 2
"""The rule fires where at least this many drawn tasks have a shown value as their gold (one is the draw's noise:
a mix whose rare gold meets the seed's 375 once in 256)."""
_NUM = re.compile(r"(?:(?<=\\n)|(?<![\w.]))(-?\d+(?:\.\d+)?)(?!\w|\.\d)")
"""A number token, a sign attached only where no digit precedes it; after a Jinja string's ``\\n`` too."""
_RUN = re.compile(ARITH + "+")
WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen twenty").split()
_SAYS = re.compile(r"(?i)\b(?:plus|minus|times|divided|multiplied|added|subtract\w*|sum|product)\b")


def _view(text: str) -> str:
    return text.replace("\\n", "\n")


def _blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of non-blank lines of ``text``."""
    return [(m.start(), m.end()) for m in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", text)]


def _reaching(view: str, value: Fraction) -> str | None:
    """A run of plain arithmetic in ``view`` (with an operator) whose value is ``value``: the working's first."""
    for line in view.split("\n"):
        for run in _RUN.findall(normalised(line)):
            run = run.strip()
            if BINARY.search(run) and value_of(run) == value:
                return run
    return None


def _scaled(run: str, support: set[Fraction], bound: Fraction) -> dict[Fraction, Fraction] | None:
    """{each number of ``run`` and its value: its scaled self} at the least power of ten putting the value beyond
    ``bound`` and outside ``support``; None where none up to 10**MAX_POWER does."""
    numbers = [Fraction(t) for t in _NUM.findall(run)]
    value = value_of(run) if len(numbers) > 1 else numbers[0] if numbers else None
    for power in range(1, MAX_POWER + 1):
        k = 10 ** power
        scaled = _NUM.sub(lambda m: shown(Fraction(m.group(1)) * k), run)
        new = value_of(scaled) if len(numbers) > 1 else value * k if value is not None else None
        if len(numbers) == 1 and new is not None and abs(new) > bound and new not in support:
            return {value: new}  # a lone value (an instruction's "Answer: 12"): no arithmetic to keep
        if new is not None and abs(new) > bound and new not in support:
            # a number the value also is (7 * 1 = 7) would need two new values: no scaling keeps both
            return None if value in numbers else {**{n: n * k for n in numbers}, value: new}
    return None


def _rewrite(block: str, mapping: dict[Fraction, Fraction]) -> str:
    def number(m: re.Match) -> str:
        v = Fraction(m.group(1))
        return shown(mapping[v]) if v in mapping else m.group(0)

    lines = _NUM.sub(number, block).split("\n")
    words = {WORDS[int(v)]: shown(new) for v, new in mapping.items() if v.denominator == 1 and 0 <= v <= 20}
    said = re.compile(rf"(?i)\b({'|'.join(words)})\b") if words else None
    for i, line in enumerate(lines):  # number words only where a line says arithmetic in words (not "one line")
        if said and (_SAYS.search(line) or len(said.findall(line)) >= 2):
            lines[i] = said.sub(lambda m: words[m.group(1).lower()], line)
    return "\n".join(lines)


def _offending(text: str, support: set[Fraction]) -> list[Fraction]:
    return list(dict.fromkeys(s.value for s in shown_answers(_view(text)) if s.value in support))


def moved(text: str, support: set[Fraction], bound: Fraction) -> str | None:
    """``text`` with each example whose shown answer is in ``support`` moved beyond ``bound`` (module docstring), or
    None where that leaves a shown answer in the support or a worked example wrong that was right."""
    was_wrong = bool(wrong_examples(_view(text)))
    pieces, at = [], 0
    for start, end in _blocks(text):
        block = text[start:end]
        values = _offending(block, support)
        pieces.append(text[at:start])
        at = end
        mapping: dict[Fraction, Fraction] = {}
        bare = not results(_view(block).split("\n"))  # no arithmetic at all: a value shown in an instruction
        for value in values:
            run = _reaching(_view(block), value)
            scaled = _scaled(run, support, bound) if run else _scaled(shown(value), support, bound) if bare else None
            if scaled is None or any(mapping.get(k, v) != v for k, v in scaled.items()):
                mapping = {}
                break
            mapping |= scaled
        if not values:
            pieces.append(block)
        elif mapping:
            pieces.append(_rewrite(block, mapping))
        elif "{{" in block or "{%" in block or "<" in block:
            return None  # more than an example: a repair by hand
        # else: an example no arithmetic reaches, dropped
    out = "".join(pieces) + text[at:]
    out = re.sub(r"\n{3,}", "\n\n", out)
    if _offending(out, support) or (wrong_examples(_view(out)) and not was_wrong):
        return None
    return out


def shown_answer(d: dict, f: HarnessFiles) -> Decision:
    """The prompt's examples whose answers are golds of the mix moved beyond the measured support."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MODE]
    if not found:
        return f"no {MODE} finding (main's prompts show no answer the task mix's golds take)"
    measured = support_of(found[0])
    if measured is None:
        return f"{MODE} carries no measured support to move the examples beyond"
    support, bound = measured
    evidence = found[0].get("evidence") or {}
    hits = round(float(evidence.get("mass") or 0.0) * int(evidence.get("drawn") or 0))
    if hits < MIN_HITS:  # one draw in hundreds: no pay a policy learns to copy, and not worth a candidate's place
        return (f"{MODE}: the shown values are the gold of {hits} of {evidence.get('drawn')} drawn tasks (fewer than "
                f"{MIN_HITS}): within the draw's noise")
    files, moves = {}, []
    for path, text in zip(TEMPLATES, (f.system_prompt, f.user_prompt)):
        if not text or not (values := _offending(text, support)):
            continue
        new = moved(text, support, bound)
        if new is None:
            return (f"{path} shows {', '.join(shown(v) for v in values[:3])} as an answer and no example of it can "
                    "be moved beyond the golds with its arithmetic right, nor dropped as only an example: fix by hand")
        files[path] = new
        moves += [shown(v) for v in values]
    if not files:
        return (f"{MODE} names values the rendered prompts show that no template's text shows (template code writes "
                "them): fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    return Change(
        RULE, f"{RULE}:" + ",".join(sorted(set(moves))), min(1.0, 10 * rate),
        "Move the prompt's examples out of the answers the tasks take",
        f"{MODE} rate {rate:.3f}: the prompts show {', '.join(sorted(set(moves)))} as answers, golds of the mix "
        f"({evidence.get('drawn')} tasks drawn; {evidence.get('copied')} of {evidence.get('replies')} replies end on "
        f"one); the examples now answer beyond {shown(bound)}.",
        "An example's answer is what a policy copies first; when it is a gold the mix produces, copying it is paid "
        "whenever the gold is that value, reward for copying rather than working. An example whose answer no task "
        "has teaches only the format and the working.",
        ["verified_mean increase: the policy is paid for working the task, not for copying an example's answer"],
        files, f"{MODE} named", root_cause=True)


def shown_evidence(digest: dict, change: Change) -> str | None:
    """For this rule's change on a named ``main:shown_answer``: "" when the branch's templates show no answer in the
    measured support, else what they still show; None for any other change (exact: the templates' text re-read)."""
    found = [m for m in digest.get("failure_modes") or [] if m.get("name") == MODE]
    measured = support_of(found[0]) if found else None
    if change.rule != RULE or measured is None:
        return None
    left = [f"{p}: {shown(v)}" for p in TEMPLATES if p in change.files for v in _offending(change.files[p],
                                                                                            measured[0])]
    return f"the branch's templates still show {left[0]} as an answer" if left else ""

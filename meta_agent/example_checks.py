"""Worked examples in main's rendered prompts, checked by trusted arithmetic (issue 44).

A prompt's worked example is the reply the policy imitates from its first step: one that computes wrongly teaches
wrong arithmetic, one whose ``Answer:`` value disagrees with its own working teaches an answer line that ignores the
working.  The gate's prompt checks (render, length, leak) compare a candidate with main and never read what an
example claims, so a wrong one was never named.  Here trusted code reads main's rendered prompts (archive rows: the
sandbox's output, read as bounded text, never run) for values stated as results and checks each:

- ``result``: ``<expression> = <value>``, both sides plain arithmetic (numbers, ``+ - * /``, parentheses; ``×``,
  ``÷``, ``−`` and ``3 x 4`` read as those), whose two values differ.  Evaluated exactly (fractions) by walking the
  expression's syntax tree (``ast.parse`` in eval mode, a whitelist of nodes: no name, call, power or attribute),
  never ``eval``.  An expression joined to a word (``x + 3 = 10``, ``2^3 + 1``) is no plain arithmetic: skipped.
- ``answer``: an example's ``Answer: <number>`` against what it should be: the value of the task the example
  restates (``Question: What is 125 + 250?``), else the result its working reached (the last number of the working
  above it in the same paragraph, a stated result counted at its computed value).

The task's own question is cut from a prompt before it is read: a question may state an equation of its own.

    wrong_examples("14 * 12 = 158\\nAnswer: 158")   # [Wrong(line='14 * 12 = 158', stated='158', computed='168',
                                                   #  kind='result', ...), Wrong(line='Answer: 158', ...)]
    checks, findings = worked_example_checks(rows)  # the check; main:worked_example where main's prompts fail it
    corrected(text)                                 # each wrong stated value replaced by the computed one
"""

from __future__ import annotations

import ast
import json
import operator
import re
from fractions import Fraction
from collections.abc import Callable
from typing import NamedTuple

from meta_agent.digest_rows import example, json_obj

NAME = "worked_example"
MODE = "main:" + NAME
EXAMPLES = 3
MAX_PROMPT_CHARS = 50_000
"""The most of one rendered prompt read (hostile text: bounded)."""
MAX_EXPRESSION, MAX_DIGITS, MAX_VALUE = 200, 30, 10 ** 60
"""An expression longer, a number with more digits or a value larger is not judged (no arithmetic blow-up)."""

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
ARITH = r"[\d_.+\-*/() ]"
_TAIL = re.compile(ARITH + r"+$")
_HEAD = re.compile(r"\s*" + ARITH + r"*")
BINARY = re.compile(r"[\d)]\s*[+\-*/]\s*[\d(.\-]")
_ANSWER = re.compile(r"(?<![\w<])answer\s*:\s*\$?\s*(-?\d[\d_]*(?:\.\d+)?(?:/\d+)?)(?![\w/.]\d|\w)", re.I)
_NUMBER = re.compile(r"-?\d[\d_]*(?:\.\d+)?")
QUESTION = re.compile(r"^\W*(?:question|problem|task|q)\s*\d*\s*[:.)]", re.I)
_JOINED = set("^%!_<>$")


class Wrong(NamedTuple):
    """One stated value trusted arithmetic disagrees with."""

    line: str
    """The prompt line it sits on, stripped."""
    stated: str
    computed: str
    kind: str
    """``result`` (an expression's stated value) or ``answer`` (an example's Answer: value)."""
    index: int = 0
    """The line's index in the text read."""
    span: tuple[int, int] = (0, 0)
    """Where ``stated`` sits in the line (the line as given: normalisation keeps every character's place)."""


def value_of(expression: str) -> Fraction | None:
    """The exact value of plain arithmetic, or None (anything else, division by zero, too long or too large)."""
    text = expression.strip()
    if not text or len(text) > MAX_EXPRESSION or not re.fullmatch(ARITH + "+", text):
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _walk(tree.body, text)


def _walk(node: ast.AST, text: str) -> Fraction | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        literal = (ast.get_source_segment(text, node) or "").replace("_", "")
        return Fraction(literal) if literal and len(literal) <= MAX_DIGITS else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _walk(node.operand, text)
        return None if inner is None else -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _walk(node.left, text), _walk(node.right, text)
        if left is None or right is None or isinstance(node.op, ast.Div) and right == 0:
            return None
        out = _OPS[type(node.op)](left, right)
        return out if abs(out) <= MAX_VALUE else None
    return None


def shown(value: Fraction) -> str:
    """``value`` as a prompt would write it: an integer, a finite decimal, else a fraction."""
    for places in range(MAX_DIGITS):
        scaled = value * 10 ** places
        if scaled.denominator == 1:
            digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
            sign = "-" if scaled < 0 else ""
            return sign + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)
    return f"{value.numerator}/{value.denominator}"


def _agrees(stated_text: str, stated: Fraction, computed: Fraction) -> bool:
    """Equal, or a decimal written to fewer places than the value has and rounded right."""
    if stated == computed:
        return True
    places = len(stated_text.split(".")[1]) if re.fullmatch(r"-?\d+\.\d+", stated_text) else None
    return places is not None and abs(stated - computed) <= Fraction(1, 2 * 10 ** places)


def normalised(line: str) -> str:
    """``line`` with ``×`` ``·`` ``÷`` ``−`` ``3 x 4`` and thousands separators in Python's arithmetic, every
    character in its place (so a span found here is the same span in the line as given)."""
    line = line.translate(str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-"}))
    line = re.sub(r"(?<=\d)(\s*)[xX](?=\s*\d)", lambda m: m.group(1) + "*", line)
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "_", line)


class _Statement(NamedTuple):
    expression: str
    stated: str
    value: Fraction
    computed: Fraction
    span: tuple[int, int]


def statements(line: str) -> list[_Statement]:
    """Every ``<expression> = <value>`` of a (normalised) line whose two sides are plain arithmetic."""
    out = []
    cuts = [m.start() for m in re.finditer("=", line)]
    bounds = [-1] + cuts + [len(line)]
    for k, at in enumerate(cuts):
        left = line[bounds[k] + 1:at]
        tail = _TAIL.search(left)
        head = _HEAD.match(line, at + 1)
        if not tail or not head:
            continue
        before, expression = left[:tail.start()], tail.group().strip()
        start = head.start() + len(head.group()) - len(head.group().lstrip())
        stated = head.group().strip().rstrip(".")
        after = line[start + len(stated):]
        joined = before[-1:].isalnum() and not tail.group()[0].isspace() or before[-1:] in _JOINED
        if before and joined or re.match(r"[+*/]|-\s", expression) \
                or after[:1].isalnum() or after[:1] in _JOINED - {"$"} or line[at + 1:at + 2] == "=" \
                or not (BINARY.search(expression) or BINARY.search(stated)):
            continue
        computed, value = value_of(expression), value_of(stated)
        if computed is not None and value is not None:
            out.append(_Statement(expression, stated, value, computed, (start, start + len(stated))))
    return out


def wrong_examples(text: str, question: str = "") -> list[Wrong]:
    """The stated values of ``text`` trusted arithmetic disagrees with (``question``, the task's own text, cut
    first)."""
    if question:
        text = text.replace(question, "")
    lines = text[:MAX_PROMPT_CHARS].split("\n")
    wrong: list[Wrong] = []
    for i, raw in enumerate(lines):
        line = normalised(raw)
        for s in statements(line):
            if not _agrees(s.stated, s.value, s.computed):
                wrong.append(Wrong(raw.strip(), s.stated, shown(s.computed), "result", i, s.span))
        for m in _ANSWER.finditer(line):
            stated = value_of(m.group(1))
            expected = expected_answer(lines, i, m.start())
            if stated is not None and expected is not None and not _agrees(m.group(1), stated, expected):
                wrong.append(Wrong(raw.strip(), m.group(1), shown(expected), "answer", i, m.span(1)))
    return wrong


def expected_answer(lines: list[str], index: int, column: int | None = None, *,
                    any_number: bool = False) -> Fraction | None:
    """What the example whose Answer: line is ``lines[index]`` (at ``column``) should answer: the value of the
    question it restates, else the last number of its working (a stated result at its computed value), where the
    working states a result (or, ``any_number``, holds any number); None where its paragraph has neither.  A
    question's own numbers are never the working's."""
    paragraph = [lines[index][:column] if column is not None else ""]
    for j in range(index - 1, -1, -1):
        if not lines[j].strip():
            break
        paragraph.insert(0, lines[j])
    asked = [normalised(p) for p in paragraph if QUESTION.match(p)]
    for q in asked[-1:]:
        runs = [r.strip() for r in re.findall(ARITH + "+", q[QUESTION.match(q).end():]) if BINARY.search(r)]
        values = [v for r in runs if (v := value_of(r)) is not None]
        if len(values) == 1:
            return values[0]
    working = [normalised(p) for p in paragraph if not QUESTION.match(p)]
    if not any_number and not any(statements(line) for line in working):
        return None  # no working to reach a value (a line like "Answer: 42" shows the form, not a result)
    for line in reversed(working):
        found = statements(line)
        numbers = [(m.start(), m.group()) for m in _NUMBER.finditer(line) if not _in_answer(line, m.start())]
        if not numbers:
            continue
        last_at = numbers[-1][0]
        if found and found[-1].span[0] <= last_at < found[-1].span[1] + 1:
            return found[-1].computed
        return value_of(numbers[-1][1])
    return None


def _in_answer(line: str, at: int) -> bool:
    """Whether the number at ``at`` is an Answer: line's own value (not working)."""
    return any(m.start(1) <= at < m.end(1) for m in _ANSWER.finditer(line))


def corrected(text: str) -> str:
    """``text`` with each wrong stated value that is a plain number replaced by the computed one (the rest of each
    line as it was); a wrong one that is an expression, or whose value has no finite decimal, stays."""
    lines = text.split("\n")
    fixes = sorted({(w.index, w.span, w.computed) for w in wrong_examples(text)
                    if _NUMBER.fullmatch(w.stated) and "/" not in w.computed}, reverse=True)
    for index, (start, end), computed in fixes:
        lines[index] = lines[index][:start] + computed + lines[index][end:]
    return "\n".join(lines)


# -- the answer line asked for before the working --------------------------------------------------------------

ANSWER_FIRST_NAME = "answer_first"
EXAMPLE_ANSWER = re.compile(r"^([ \t]*Answer:[ \t]*)([^\n<]*)$", re.M)
"""An example's own Answer: line (a value, not a ``<...>`` placeholder)."""
LABEL = re.compile(r"^\W*(?:question|problem|task|q|example|sample)\b.*:|^[^:]*:\s*$", re.I)
"""A line that opens a part of an example (``Question: ...``, ``Reply:``): working never runs past one."""
_SPEC = r'(?:(?:the|a|your)\s+)?(?:final\s+)?(?:line\s+)?(?:"Answer:\s*<[^<>\n]*>"|Answer:\s*<[^<>\n]*>)'
ANSWER_FIRST = re.compile(
    r"(?P<lead>\b(?:(?:start|begin|open|lead)(?:\s+\w+){0,2}?\s+with|(?:first\s+)?(?:put|give|write|place|state|"
    r"print)(?:\s+(?:down|out))?)\s+)(?P<spec>" + _SPEC + r")(?P<first>\s+first)?"
    r"(?P<mid>\s*[,;]?\s*(?:and\s+)?(?P<then>then|afterwards|after that|after it|after this|followed by)\s*,?\s*)"
    r"(?P<rest>[^.;\n]+)(?P<end>[.;]?)", re.I)
"""An instruction naming the Answer: line and then what comes after it; :func:`asks_first` says whether it puts the
line first (``Begin with ... and then``, ``Put ... first; afterwards``), not merely mentions it."""


def asks_first(m: re.Match) -> bool:
    lead = m.group("lead").lower()
    return bool(re.match(r"(?:start|begin|open|lead)\b", lead) or m.group("first") or lead.startswith("first"))


def answers_before_working(lines: list[str]) -> list[tuple[int, int]]:
    """(i, j) for each example Answer: line ``lines[i]`` with working below it in its paragraph, ``lines[i+1:j]``
    (up to a blank line, a label or another Answer: line; working holds a digit)."""
    out, i = [], 0
    while i < len(lines):
        j = i + 1
        if EXAMPLE_ANSWER.match(lines[i]) and "{{" not in lines[i]:
            while j < len(lines) and lines[j].strip() and not LABEL.match(lines[j]) \
                    and not EXAMPLE_ANSWER.match(lines[j]):
                j += 1
            if j > i + 1 and any(re.search(r"\d", line) for line in lines[i + 1:j]):
                out.append((i, j))
        i = j
    return out


def answer_first(text: str) -> list[dict]:
    """Where ``text`` asks for the Answer: line before the working: each such instruction and each example whose
    Answer: line stands above its working."""
    lines = text.split("\n")
    found = [{"line": lines[text.count("\n", 0, m.start())].strip()[:200], "kind": "instruction"}
             for m in ANSWER_FIRST.finditer(text) if asks_first(m)]
    return found + [{"line": f"{lines[i].strip()} / {lines[i + 1].strip()}"[:200], "kind": "example"}
                    for i, _ in answers_before_working(lines)]


def answer_first_checks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The answer-order check on main's training rows, and ``main:answer_first`` (warning) where main's prompts ask
    for the Answer: line before the working: the answer is committed before any working is written, and under a
    short budget the working is what gets cut."""
    n, carrying = read_rows(rows, answer_first)
    return rows_check(ANSWER_FIRST_NAME, "warning", n, carrying, "ask for the Answer: line before the working",
                  lambda w: f"{w['kind']}: '{w['line'][:100]}'")


def _prompt_parts(row: dict) -> list[tuple[str, str]]:
    """(role, text) of the prompt a row was trained on, from its messages (else its prompt text)."""
    messages = json_obj(row.get("messages"))
    if isinstance(messages, list) and messages:
        return [(str(m.get("role")), m["content"]) for m in messages[:-1]
                if isinstance(m, dict) and isinstance(m.get("content"), str)]
    return [("prompt", row["prompt"])] if isinstance(row.get("prompt"), str) else []


def read_rows(rows: list[dict], read: Callable[[str], list[dict]]) -> tuple[int, list[tuple[dict, list[dict]]]]:
    """(how many training rows were read, each row whose prompt ``read`` finds something in, with what, each item
    with its ``role``): every distinct prompt part read once, the row's own question cut first."""
    rows = [r for r in rows if r.get("split", "train") == "train" and _prompt_parts(r)]
    seen: dict[tuple[str, str], list[dict]] = {}
    carrying = []
    for row in rows:
        task = json_obj(row.get("task"))
        question = str(task.get("question") or "") if isinstance(task, dict) else ""
        found = []
        for role, text in _prompt_parts(row):
            key = (role, text.replace(question, "") if question else text)
            if key not in seen:
                seen[key] = read(key[1][:MAX_PROMPT_CHARS])
            found += [{"role": role, **item} for item in seen[key]]
        if found:
            carrying.append((row, found))
    return len(rows), carrying


def rows_check(name: str, severity: str, n: int, carrying: list[tuple[dict, list[dict]]], what: str,
           show: Callable[[dict], str]) -> tuple[list[dict], list[dict]]:
    """The check ``name`` over ``n`` rows and, where any row carries ``what``, its ``main:<name>`` finding: the rate
    is the share of rows that do, ``evidence["found"]`` each item once."""
    if not n:
        return [], []
    items = list({json.dumps(w, sort_keys=True): w for _, found in carrying for w in found}.values())
    detail = (f"{len(carrying)} of {n} rendered prompts {what}: " + "; ".join(show(w) for w in items[:4])
              if carrying else f"none of {n} rendered prompts {what}")
    check = {"name": name, "passed": not carrying, "detail": detail[:400]}
    if not carrying:
        return [check], []
    examples = [example(r) | {"prompt": " | ".join(show(w)[:80] for w in found[:2])}
                for r, found in carrying[:EXAMPLES]]
    return [check], [{"name": "main:" + name, "source": "main_checks", "severity": severity,
                      "rate": len(carrying) / n, "message": f"main fails the {name} check: {detail}"[:400],
                      "examples": examples, "evidence": {"found": items, "rows": n}}]


def _wrong_items(text: str) -> list[dict]:
    return [{"line": w.line[:200], "stated": w.stated, "computed": w.computed, "kind": w.kind}
            for w in wrong_examples(text)]


def worked_example_checks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The worked-example check on main's training rows (the prompts main's templates rendered), and the
    ``main:worked_example`` finding (error) where any carries a wrong example: ``evidence["found"]`` lists each
    wrong value once (``role``: the message it is in; ``line``, ``stated``, ``computed``, ``kind``)."""
    n, carrying = read_rows(rows, _wrong_items)
    return rows_check(NAME, "error", n, carrying, "carry a worked example trusted arithmetic disagrees with",
                  lambda w: f"'{w['line'][:80]}' ({w['kind']}: {w['stated']}, computes {w['computed']})")


def example_checks_on_main(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Every check of this module on main's training rows: (the checks, the findings of those main fails)."""
    checks, found = worked_example_checks(rows)
    order = answer_first_checks(rows)
    return checks + order[0], found + order[1]

"""Neutral re-spelling of a test and its mutation twins, the real copy included, so that no copy reads as the original.

    text = respell(text, [(real_name, [twin_name, ...], original_body_lines), ...], rng)

A twin is an edit of its test, so the test as it was written is the one copy that the old test file (the policy saw
it), the file's habits and a plain length or likeness measure would single out.  Every copy, the real one included,
has the line where the copies differ written anew by the same meaning-preserving respellings: the operands of a
symmetric claim swapped where one of them is a plain value (``assert 4 == len(s)``, ``self.assertEqual(x, 1)``), its
literals written plainly (decimal digits, no needless ``r``), its simple string literals in the other quote, 0-3
redundant parentheses around expressions (``assert (f(x)) == 3``).  Python reads the same program; no copy keeps its
line as it was.  The respellings are drawn per copy so that the real copy's length, and its likeness to the test as
written (difflib's character measure over the body), rank anywhere among its copies with equal odds.  The copies keep
their number of lines, so the places ``execution.twins`` laid them stay right.
"""

from __future__ import annotations

import ast
import math
import random
import re
from collections import Counter

from execution.twin_edits import source_lines

MAX_PAIRS = 3
"""At most this many redundant pairs per copy: more reads as machine-written."""
DRAWS = 300
SYMMETRIC_METHODS = frozenset({"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals", "assertIs",
                               "assertIsNot"})
SYMMETRIC_OPS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
PLAIN = (ast.Constant, ast.Name, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.expr_context, ast.unaryop)
"""Nodes whose evaluation has no effect another operand could see: an operand made of them may go second."""


def respell(text: str, groups: list[tuple[str, list[str], list[str]]], rng: random.Random) -> str:
    """``text`` with each group's copies (the real test's name, its twins' names, the real test's body lines as
    written) respelled as the module says.  A group whose copies cannot be found once each by name, or whose
    differing line offers some copy no respelling, stays as it is."""
    if not groups:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = source_lines(text)
    funcs: dict[str, list[ast.FunctionDef]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs.setdefault(node.name, []).append(node)
    for real, twins, original in groups:
        copies = [funcs.get(name, []) for name in [real, *twins]]
        if any(len(found) != 1 for found in copies):
            continue
        _respell_group(lines, [found[0] for found in copies], [line.rstrip("\r\n") for line in original], rng)
    return "".join(lines)


def _respell_group(lines: list[str], copies: list[ast.FunctionDef], original: list[str], rng: random.Random) -> None:
    """Respell the differing line of each copy (``copies[0]`` is the real one) in ``lines``, in place."""
    bodies = [[line.rstrip("\r\n") for line in lines[f.lineno:f.end_lineno]] for f in copies]
    offset = next((j for j in range(min(map(len, bodies)))
                   if any(body[j] != bodies[0][j] for body in bodies[1:])), None)
    if offset is None:
        return
    variants = [_variants(body[offset], rng) for body in bodies]
    # a twin's line is new text already: one with no respelling (a string with escapes, in no call) stays as it is,
    # the real copy's must change
    variants[1:] = [found or [body[offset]] for found, body in zip(variants[1:], bodies[1:])]
    if not variants[0]:
        return
    # as a reader measures a body: its lines and breaks (length), its stripped lines joined (likeness)
    base = [sum(map(len, body)) + len(body) - len(body[offset]) for body in bodies]
    near = [_Likeness([row.strip() for at, row in enumerate(body) if at != offset], [row.strip() for row in original])
            for body in bodies]
    shorter, nearer = rng.randrange(len(copies)), rng.randrange(len(copies))  # copies to rank under the real one
    chosen = fallback = None
    for _ in range(DRAWS):
        pick = [rng.choice(found) for found in variants]
        size = [b + len(p) for b, p in zip(base, pick)]
        if size.count(size[0]) != 1 or sum(s < size[0] for s in size[1:]) != shorter:
            continue
        fallback = fallback or pick
        like = [n(p.strip()) for n, p in zip(near, pick)]
        if like.count(like[0]) == 1 and sum(x > like[0] for x in like[1:]) == nearer:
            chosen = pick
            break
    for copy, line in zip(copies, chosen or fallback or [rng.choice(found) for found in variants]):
        row = copy.lineno + offset  # 0-based index of the differing line in ``lines``
        lines[row] = line + lines[row][len(lines[row].rstrip("\r\n")):]


class _Likeness:
    """difflib's ``quick_ratio`` of a body (fixed lines plus one line to come) against the test as written: the
    characters they share over their lengths, counted once for the fixed part."""

    def __init__(self, fixed: list[str], original: list[str]):
        self.base, self.original = Counter("\n".join(fixed) + "\n"), Counter("\n".join(original))
        self.shared = sum(min(n, self.original[c]) for c, n in self.base.items())
        self.size = sum(self.base.values()) + sum(self.original.values())

    def __call__(self, line: str) -> float:
        extra = Counter(line)
        shared = self.shared + sum(min(self.base[c] + n, self.original[c]) - min(self.base[c], self.original[c])
                                   for c, n in extra.items())
        return 2 * shared / (self.size + len(line))


def _variants(line: str, rng: random.Random) -> list[str]:
    """Respellings of ``line`` that Python reads as the same statement, each differing from it: the operands swapped
    or not, the quotes swapped or not, then 0 to ``MAX_PAIRS`` redundant pairs (a few draws of each count)."""
    found = set()
    line_as_is, line = line, _plain_literals(line)
    for swapped in dict.fromkeys([line, _swapped(line) or line]):  # in order: the draws follow the seed alone
        for quoted in dict.fromkeys([swapped, _requoted(swapped) or swapped]):
            sites = _sites(quoted)
            for count in range(min(MAX_PAIRS, len(sites)) + 1):
                for _ in range(3 if count else 1):
                    found.add(_wrap(quoted, rng.sample(sites, count)))
    found.discard(line_as_is)
    return sorted(found)


def _plain_literals(line: str) -> str:
    """``line`` with its literals written plainly, in every copy alike: an integer in decimal digits, a raw string
    that needs no backslash without its ``r`` (a nudged twin literal is written by ``repr``, the real one as its
    author wrote it: ``0xB1``, ``r"(.+?)"``)."""
    found = _statement(line)
    if found is None:
        return line
    indent, code, stmt = found
    inside = {id(n) for f in ast.walk(stmt) if isinstance(f, ast.JoinedStr) for n in ast.walk(f)}
    edits = []
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Constant) or id(node) in inside or node.lineno != node.end_lineno:
            continue
        start, end = _chars(code, node.col_offset), _chars(code, node.end_col_offset)
        written = code[start:end]
        if type(node.value) is int and not written.isdigit():
            edits.append((start, end, str(node.value)))
        elif type(node.value) is float and math.isfinite(node.value) and written != repr(node.value):
            edits.append((start, end, repr(node.value)))
        elif isinstance(node.value, str) and re.fullmatch(r"[rR](['\"])[^'\"\\]*\1", written):
            edits.append((start, end, written[1:]))
        elif isinstance(node.value, str) and re.fullmatch(r"[rR](['\"]).*\1", written):
            edits.append((start, end, repr(node.value)))  # a raw string's backslashes escaped, as a nudge is written
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text + code[end:]
    return line[:indent] + code


def _statement(line: str) -> tuple[int, str, ast.stmt] | None:
    """(indent, code, its statement) of a one-line statement or a block's head (``with ...:``)."""
    indent = len(line) - len(line.lstrip())
    code = line[indent:]
    try:
        return indent, code, ast.parse(code + ("\n pass" if code.rstrip().endswith(":") else "")).body[0]
    except (SyntaxError, IndexError):
        return None


def _swapped(line: str) -> str | None:
    """``line`` with the two operands of its symmetric claim swapped (``a == b``, ``not (a != b)``, ``a is b``,
    ``assertEqual(a, b)``, ``assertFalse(a != b)``), where one of them is a plain value so that evaluating it second
    changes nothing; None where there is no such claim."""
    found = _statement(line)
    if found is None:
        return None
    indent, code, stmt = found
    pair = None
    test = stmt.test if isinstance(stmt, ast.Assert) else None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        call = stmt.value
        if call.func.attr in SYMMETRIC_METHODS and len(call.args) >= 2:
            pair = call.args[0], call.args[1]
        elif call.func.attr in ("assertTrue", "assertFalse") and len(call.args) == 1:
            test = call.args[0]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if pair is None and isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], SYMMETRIC_OPS):
        pair = test.left, test.comparators[0]
    if pair is None or any(isinstance(n, ast.Starred) or n.lineno != 1 or n.end_lineno != 1 for n in pair) \
            or not any(all(isinstance(n, PLAIN) for n in ast.walk(side)) for side in pair):
        return None
    (a0, a1), (b0, b1) = [(_chars(code, n.col_offset), _chars(code, n.end_col_offset)) for n in pair]
    return line[:indent] + code[:a0] + code[b0:b1] + code[a1:b0] + code[a0:a1] + code[b1:]


def _requoted(line: str) -> str | None:
    """``line`` with each simple one-line string literal (no quote, backslash or brace inside, no f-string) in the
    other quote; None where there is none."""
    found = _statement(line)
    if found is None:
        return None
    indent, code, stmt = found
    inside = {id(n) for f in ast.walk(stmt) if isinstance(f, ast.JoinedStr) for n in ast.walk(f)}
    spans = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in inside \
                and node.lineno == node.end_lineno == 1:
            start, end = _chars(code, node.col_offset), _chars(code, node.end_col_offset)
            written = re.fullmatch(r"([rRbBuU]{0,2})(['\"])([^'\"\\{}]*)\2", code[start:end])
            if written:
                spans.append((start, end, written))
    if not spans:
        return None
    for start, end, written in sorted(spans, key=lambda s: -s[0]):
        quote = "'" if written.group(2) == '"' else '"'
        code = code[:start] + written.group(1) + quote + written.group(3) + quote + code[end:]
    return line[:indent] + code


def _sites(line: str) -> list[tuple[int, int]]:
    """(start, end) character spans on ``line`` of expressions a pair of parentheses leaves meaning the same: the
    asserted expression and its operands, the arguments of an assertion call, of a ``with`` item's call."""
    found_stmt = _statement(line)
    if found_stmt is None:
        return []
    indent, code, stmt = found_stmt
    found: list[ast.expr] = []
    if isinstance(stmt, ast.Assert):
        found.append(stmt.test)
        if isinstance(stmt.test, ast.Compare):
            found += [stmt.test.left, *stmt.test.comparators]
        elif isinstance(stmt.test, ast.Call):
            found += stmt.test.args
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        found += [*stmt.value.args, *(k.value for k in stmt.value.keywords)]
    elif isinstance(stmt, ast.With):
        for item in stmt.items:
            if isinstance(item.context_expr, ast.Call):
                found += [*item.context_expr.args, *(k.value for k in item.context_expr.keywords)]
    spans = set()
    for node in found:
        if node.lineno != 1 or node.end_lineno != 1 or isinstance(node, ast.Starred):
            continue
        start, end = _chars(code, node.col_offset), _chars(code, node.end_col_offset)
        if not re.fullmatch(r"\(.*\)", code[start:end]):  # a pair already there reads as one more
            spans.add((indent + start, indent + end))
    return sorted(spans)


def _chars(code: str, byte_col: int) -> int:
    """The character index of a UTF-8 byte column of ``code`` (the parser counts bytes)."""
    return len(code.encode()[:byte_col].decode(errors="ignore"))


def _wrap(line: str, spans: list[tuple[int, int]]) -> str:
    """``line`` with each span in parentheses (spans nest or stand apart: expressions never half-overlap)."""
    marks = sorted([(start, 1) for start, _ in spans] + [(end, 0) for _, end in spans], reverse=True)
    for at, opening in marks:  # right to left, closings first at a shared place
        line = line[:at] + ("(" if opening else ")") + line[at:]
    return line

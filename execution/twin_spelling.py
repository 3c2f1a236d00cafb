"""Neutral re-spelling of a test and its mutation twins, so that no copy's length says which one is real.

    text = respell(text, [(real_name, [twin_name, ...]), ...], rng)

A twin differs from its test in one token, and that token's length is rarely the real one's (``==`` is a character
longer than the ``<`` a twin claims, one ``match=`` message longer than another, ``str`` shorter than ``bytes``), so
the longer or the shorter copy would name the real test every time.  Every copy, the real one included, gets
redundant parentheses around expressions of the line where the copies differ (``assert (f(x)) == 3``,
``self.assertEqual((a), b)``): Python reads the same program, and the pairs are drawn per copy so that the real copy's
length ranks anywhere among its copies' with equal odds, never tied with a twin's.  The copies' lines keep their
number, so the places ``execution.twins`` laid them stay right.
"""

from __future__ import annotations

import ast
import random
import re

from execution.twin_edits import source_lines

MAX_PAIRS = 3
"""At most this many redundant pairs per copy: more reads as machine-written."""
DRAWS = 200


def respell(text: str, groups: list[tuple[str, list[str]]], rng: random.Random) -> str:
    """``text`` with each group's copies (the real test's name, its twins' names) padded as the module says.  A group
    whose copies cannot be found once each by name, or whose differing line offers no expression or stands
    elsewhere in the file, stays as it is."""
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
    for real, twins in groups:
        copies = [funcs.get(name, []) for name in [real, *twins]]
        if any(len(found) != 1 for found in copies):
            continue
        _pad_group(lines, [found[0] for found in copies], rng)
    return "".join(lines)


def _pad_group(lines: list[str], copies: list[ast.FunctionDef], rng: random.Random) -> None:
    """Pad the differing line of each copy (``copies[0]`` is the real one) in ``lines``, in place."""
    bodies = [[line.rstrip("\r\n") for line in lines[f.lineno:f.end_lineno]] for f in copies]
    offset = next((j for j in range(min(map(len, bodies)))
                   if any(body[j] != bodies[0][j] for body in bodies[1:])), None)
    if offset is None:
        return
    inside = {row for f in copies for row in range(f.lineno - 1, f.end_lineno)}
    elsewhere = {line.strip() for row, line in enumerate(lines) if row not in inside}
    if any(body[offset].strip() in elsewhere for body in bodies):
        return  # a padded line is seen nowhere else: padding would tell how often a copy's line repeats in the file
    sites = [_sites(body[offset]) for body in bodies]
    if any(not found for found in sites):
        return
    base = [sum(map(len, body)) + len(body) for body in bodies]  # as a reader measures the body: lines and breaks
    target = rng.randrange(len(copies))  # how many copies are to be shorter than the real one
    best = [0] * len(copies)
    for _ in range(DRAWS):
        pairs = [rng.randint(0, min(MAX_PAIRS, len(found))) for found in sites]
        size = [b + 2 * p for b, p in zip(base, pairs)]
        if size.count(size[0]) == 1 and sum(s < size[0] for s in size[1:]) == target:
            best = pairs
            break
    for copy, body, found, count in zip(copies, bodies, sites, best):
        if count:
            row = copy.lineno + offset  # 0-based index of the differing line in ``lines``
            ending = lines[row][len(lines[row].rstrip("\r\n")):]
            lines[row] = _wrap(body[offset], rng.sample(found, count)) + ending


def _sites(line: str) -> list[tuple[int, int]]:
    """(start, end) character spans on ``line`` of expressions a pair of parentheses leaves meaning the same: the
    asserted expression and its operands, the arguments of an assertion call, of a ``with`` item's call."""
    indent = len(line) - len(line.lstrip())
    code = line[indent:]
    try:
        stmt = ast.parse(code + ("\n pass" if code.rstrip().endswith(":") else "")).body[0]
    except (SyntaxError, IndexError):
        return []
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

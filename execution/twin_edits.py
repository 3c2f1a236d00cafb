"""How a mutation twin contradicts its test: the source edits (``Edit``) that turn one expectation of a test into
its opposite (a comparison flipped, a unittest assertion for its negative, a ``raises`` expecting an unrelated
exception, or the raising body unwrapped), and the mirrored form of the real test (the twin's test, negated),
so that which copy carries a negation tells nothing.  ``execution.twins`` decides which tests get twins, names
them and lays them into their files; this module only says what a twin's lines become.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

@dataclass(frozen=True)
class Edit:
    """Replace the source from (lineno, col) to (end_lineno, end_col), 1-based lines and UTF-8 byte columns, by text."""

    lineno: int
    col: int
    end_lineno: int
    end_col: int
    text: str


def source_lines(source: str) -> list[str]:
    """The lines of ``source`` as the parser numbers them (str.splitlines also splits at form feeds and the like)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)


def as_source(value, quote: str) -> str:
    """``value`` as source, its quotes those of the literal it replaces (a file of double quotes gets double)."""
    text = repr(value)
    if isinstance(value, (str, bytes)) and quote == '"' and '"' not in text[1:-1] and "\\'" not in text:
        head = text.index("'")
        text = text[:head] + '"' + text[head + 1:-1] + '"'
    return text


def nudge(value, rng: random.Random):
    if isinstance(value, (str, bytes)):
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
        extra = rng.choice(alphabet)
        return value + (extra.encode() if isinstance(value, bytes) else extra)
    return value + rng.randint(1, 9)


OPPOSITE_METHODS = {"assertEqual": "assertNotEqual", "assertEquals": "assertNotEquals", "assertTrue": "assertFalse",
                    "assertIs": "assertIsNot", "assertIsNone": "assertIsNotNone", "assertIn": "assertNotIn",
                    "assertIsInstance": "assertNotIsInstance", "assertAlmostEqual": "assertNotAlmostEqual",
                    "assertRegex": "assertNotRegex"}
OPPOSITE_METHODS |= {b: a for a, b in OPPOSITE_METHODS.items()}
OPPOSITE_OPS = {ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Lt: ("<", ">="), ast.LtE: ("<=", ">"),
                ast.Gt: (">", "<="), ast.GtE: (">=", "<"), ast.Is: (r"is(?!\s+not\b)", "is not"),
                ast.IsNot: (r"is\s+not", "is"), ast.In: (r"(?<!not )in", "not in"), ast.NotIn: (r"not\s+in", "in")}
RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex"})


def contradictions(source: str, func: ast.FunctionDef,
                    rng: random.Random) -> list[tuple[list[Edit], Edit | None]]:
    """Edits that each contradict one top-level expectation of ``func`` (reached by every run that passes), each
    with the whole-line edit that writes the real expectation as the negation of the twin's (None: no such form)."""
    lines = source_lines(source)
    found: list[tuple[list[Edit], Edit | None]] = []
    for stmt in func.body:
        if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
            break  # a return could skip what follows
        edit, mirror = None, None
        if isinstance(stmt, ast.Assert):
            edit = _negated(lines, stmt.test)
            mirror = edit and _mirrored_assert(lines, stmt.test, edit)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
                stmt.value.func, ast.Attribute) and stmt.value.func.attr in OPPOSITE_METHODS:
            call = stmt.value.func
            edit = [Edit(call.end_lineno, call.end_col_offset - len(call.attr), call.end_lineno, call.end_col_offset,
                         OPPOSITE_METHODS[call.attr])]
            mirror = _mirrored_method(lines, source, stmt.value)
        elif isinstance(stmt, ast.With):
            edit = _other_exception(lines, stmt, source, rng) or _unwrapped(lines, stmt)
        if edit:
            found.append((edit, mirror))
    return found


def _row(lines: list[str], lineno: int) -> bytes:
    return lines[lineno - 1].rstrip("\r\n").encode()


def _mirrored_assert(lines: list[str], test: ast.expr, twin: list[Edit]) -> Edit | None:
    """``assert a == b`` (twin ``assert a != b``) written ``assert not (a != b)``: the twin's test, negated."""
    if test.lineno != test.end_lineno or any(e.lineno != test.lineno or e.end_lineno != test.lineno for e in twin):
        return None
    row = _row(lines, test.lineno)
    changed = row
    for edit in sorted(twin, key=lambda e: e.col, reverse=True):
        changed = changed[:edit.col] + edit.text.encode() + changed[edit.end_col:]
    end = test.end_col_offset + len(changed) - len(row)  # every edit lies inside the test's span
    text = changed[:test.col_offset] + b"not (" + changed[test.col_offset:end] + b")" + changed[end:]
    return Edit(test.lineno, 0, test.lineno, len(row), text.decode())


# A positive unittest assertion and the expression whose falsity it asserts, from its arguments' source.
FALSE_FORMS = {"assertEqual": (2, "{} != {}"), "assertEquals": (2, "{} != {}"), "assertTrue": (1, "not {}"),
               "assertIs": (2, "{} is not {}"), "assertIn": (2, "{} not in {}"), "assertIsNone": (1, "{} is not None"),
               "assertIsInstance": (2, "not isinstance({}, {})")}


def _mirrored_method(lines: list[str], source: str, call: ast.Call) -> Edit | None:
    """``self.assertEqual(a, b)`` (twin ``assertNotEqual``) written ``self.assertFalse(a != b)``: same outcome."""
    form = FALSE_FORMS.get(call.func.attr)
    if form is None or call.lineno != call.end_lineno or call.keywords or len(call.args) != form[0] or any(
            isinstance(a, ast.Starred) for a in call.args):
        return None
    parts = [f"({ast.get_source_segment(source, a)})" for a in call.args]
    row = _row(lines, call.lineno)
    head = call.func.end_col_offset - len(call.func.attr)
    text = row[:head] + f"assertFalse({form[1].format(*parts)})".encode() + row[call.end_col_offset:]
    return Edit(call.lineno, 0, call.lineno, len(row), text.decode())


UNRELATED_ERRORS = ("IndexError", "ZeroDivisionError", "FileNotFoundError", "RecursionError", "UnicodeDecodeError",
                    "NotImplementedError")
"""Built-in exceptions a project's own error class (whose bases a static reading cannot see) hardly derives from."""


def _other_exception(lines: list[str], stmt: ast.With, source: str, rng: random.Random) -> list[Edit] | None:
    """``with pytest.raises(E): body`` expecting another exception, one unrelated to ``E``: a body that raises
    ``E`` fails it, one that raises nothing too.  It keeps its ``raises`` (the bare body did not), so neither the
    word nor the negations tell it from its test.  Built-in names only, preferring those the file already uses."""
    import builtins

    if len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr, ast.Call):
        return None
    call = stmt.items[0].context_expr
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in RAISES or not call.args or not isinstance(call.args[0], (ast.Name, ast.Attribute)) \
            or call.args[0].lineno != call.args[0].end_lineno:
        return None
    expected = getattr(builtins, ast.get_source_segment(source, call.args[0]) or "", None)
    options = [n for n in UNRELATED_ERRORS if not isinstance(expected, type)
               or not (issubclass(getattr(builtins, n), expected) or issubclass(expected, getattr(builtins, n)))]
    used = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
    options = [n for n in options if n in used] or options
    first = call.args[0]
    return [Edit(first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, rng.choice(options))]


def _negated(lines: list[str], test: ast.expr) -> list[Edit] | None:
    """``a == b`` -> ``a != b`` (each comparison to its opposite), ``not x`` -> ``x``, otherwise ``not x``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and test.left.end_lineno == test.comparators[0].lineno:
        row = lines[test.left.end_lineno - 1].encode()
        gap = row[test.left.end_col_offset:test.comparators[0].col_offset].decode()
        pattern, opposite = OPPOSITE_OPS[type(test.ops[0])]
        edge = (r"(?<!\w)", r"(?!\w)") if pattern[0].isalpha() else (r"(?<![=!<>])", r"(?![=<>])")
        spans = [m.span() for m in re.finditer(edge[0] + pattern + edge[1], gap)]
        if len(spans) != 1:
            return None
        start = test.left.end_col_offset + len(gap[:spans[0][0]].encode())
        end = start + len(gap[spans[0][0]:spans[0][1]].encode())
        return [Edit(test.left.end_lineno, start, test.left.end_lineno, end, opposite)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and test.lineno == test.operand.lineno:
        return [Edit(test.lineno, test.col_offset, test.lineno, test.operand.col_offset, "")]
    if isinstance(test, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)):
        return [Edit(test.lineno, test.col_offset, test.lineno, test.col_offset, "not ("),
                Edit(test.end_lineno, test.end_col_offset, test.end_lineno, test.end_col_offset, ")")]
    return [Edit(test.lineno, test.col_offset, test.lineno, test.col_offset, "not ")]


def _unwrapped(lines: list[str], stmt: ast.With) -> list[Edit] | None:
    """``with pytest.raises(E): body`` -> ``body`` at the ``with``'s indentation: it must now raise nothing."""
    if len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr, ast.Call):
        return None
    call = stmt.items[0].context_expr.func
    name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
    if name not in RAISES or stmt.body[0].lineno == stmt.lineno or any(
            isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) and n.lineno != n.end_lineno
            for n in ast.walk(stmt)):
        return None  # a multi-line string would change if its lines were dedented
    shift = stmt.body[0].col_offset - stmt.col_offset
    body = lines[stmt.body[0].lineno - 1:stmt.end_lineno]
    if any(line.strip() and not line[:shift].isspace() for line in body):
        return None
    text = "".join(line[shift:] if line.strip() else line for line in body)
    last = lines[stmt.end_lineno - 1]
    return [Edit(stmt.lineno, 0, stmt.end_lineno, len(last.rstrip("\r\n").encode()), text.rstrip("\r\n"))]

"""How a mutation twin contradicts its test: the source edits (``Edit``) that turn one expectation of a test into
its opposite (a comparison flipped, a unittest assertion for its negative, a ``raises`` expecting an unrelated
exception, or the raising body unwrapped) or into another claim as positive as the real one that no program meets
beside it (``==`` made ``<`` or ``>``, ``isinstance`` of another built-in type, a ``raises`` matching another of the
file's messages), and the mirrored form of the real test (the twin's test, negated), so that neither which copy
carries a negation nor which one claims positively tells anything.  ``execution.twins`` decides which tests get
twins, names them and lays them into their files; this module only says what a twin's lines become.
"""

from __future__ import annotations

import ast
import builtins
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

@dataclass(frozen=True)
class Edit:
    """Replace the source from (lineno, col) to (end_lineno, end_col), 1-based lines and UTF-8 byte columns, by text."""

    lineno: int
    col: int
    end_lineno: int
    end_col: int
    text: str


@lru_cache(maxsize=32)
def parsed(source: str) -> ast.Module:
    """``ast.parse(source)``, once per source: drawing a grade's twins reads one file's tree many times.  Callers
    never change the tree they get (it is shared)."""
    return ast.parse(source)


@lru_cache(maxsize=32)
def names_used(source: str) -> frozenset[str]:
    """Every plain name the module ``source`` reads or binds."""
    return frozenset(n.id for n in ast.walk(parsed(source)) if isinstance(n, ast.Name))


def _segment(lines: list[str], node: ast.expr) -> str:
    """The source of a one-line ``node`` (``ast.get_source_segment`` splits the whole file on every call)."""
    return _row(lines, node.lineno)[node.col_offset:node.end_col_offset].decode()


def source_lines(source: str) -> list[str]:
    """The lines of ``source`` as the parser numbers them (str.splitlines also splits at form feeds and the like)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)


def as_source(value, quote: str) -> str:
    """``value`` as source, its quotes those of the literal it replaces (a file of double quotes gets double)."""
    text = repr(value)
    if isinstance(value, (str, bytes)) and quote == '"' and text.endswith("'") and '"' not in text[1:-1] \
            and "\\'" not in text:
        head = text.index("'")
        text = text[:head] + '"' + text[head + 1:-1] + '"'
    return text


def spelled_like(value, written: str) -> str:
    """``value`` as source in the notation ``written`` (another literal of its type) uses: hexadecimal, octal or
    binary digits and their case, ``_`` grouping, a string's prefix and quotes; ``repr`` where that cannot hold it.
    A nudged literal written by ``repr`` beside a real one written ``0xB1`` or ``r"..."`` would tell the two apart."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        head = re.match(r"0[xXoObB]", written)
        kind = {"x": "x", "o": "o", "b": "b"}.get(head.group()[1].lower(), "") if head else ""
        digits = format(value, ("_" if "_" in written else "") + (kind or "d"))
        if kind == "x" and re.search(r"[A-F]", written[2:]):
            digits = digits.upper()
        return (head.group() if head else "") + digits
    if isinstance(value, (str, bytes)):
        prefix = re.match(r"[rRbBuU]*", written).group()
        quote = written[len(prefix):][:1]
        text = as_source(value, quote if quote in "'\"" else "'")
        start = text.index(text[-1])  # the opening quote (after repr's own b)
        if "r" in prefix.lower() and "\\" in text:
            return text  # a raw literal cannot hold repr's escapes
        return prefix + text[start:]
    return repr(value)


def nudges(value, k: int, rng: random.Random) -> list:
    """Up to ``2 k`` values near ``value``: ``k`` chained steps down (where the chain can go: no number below 0, no
    string shorter than empty) and ``k`` up (a number 1-9 a step, a string a character).  The twins take theirs
    from both sides by the file's counts (``_balanced``), so the copy whose literal another copy's extends, or the
    centre of the nudges, is the real one no more often than a guess."""
    out, low, high = [], value, value
    for _ in range(k):
        if isinstance(low, (str, bytes)):
            if not low:
                break
            low = low[:-1]
        else:
            if low < 1:
                break
            low = max(low - rng.randint(1, 9), low * 0)  # never below 0 (of its own type): 1 steps down to 0
        out.append(low)
    for _ in range(k):
        high = _step_up(high, rng)
        out.append(high)
    return out


def _step_up(value, rng: random.Random):
    if isinstance(value, (str, bytes)):
        extra = rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ")
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
DISJOINT_TYPES = ("str", "bytes", "int", "float", "list", "tuple", "dict", "set", "frozenset", "bytearray", "complex")
"""Built-in types no class derives from two of (their layouts conflict): ``isinstance(x, str)`` and
``isinstance(x, int)`` never both hold."""
NEGATIVE_METHODS = re.compile(r"Not|False")


class Contradiction(NamedTuple):
    """One way a must-fail twin contradicts its test."""

    edits: list[Edit]
    mirror: Edit | None
    """The whole-line edit that writes the real expectation as the negation of the twin's (None: no such form)."""
    positive: bool
    """The twin's changed claim reads positively (no negation), as most real tests' claims do."""
    tell: bool = False
    """The twin expects a built-in exception where the real test expects one of the project's own."""
    negates: bool = False
    """The twin's claim is the real one's negation (its polarity is the opposite of the real claim's)."""


def contradictions(source: str, func: ast.FunctionDef, rng: random.Random,
                   known: frozenset[str] = frozenset()) -> list[Contradiction]:
    """Ways to contradict one top-level expectation of ``func`` (reached by every run that passes): its negation,
    and where one exists another claim as positive as the real one that no program meets beside it.  ``known``:
    names the old test file reads (a twin may take one of them)."""
    lines = source_lines(source)
    found: list[Contradiction] = []
    for stmt in func.body:
        if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
            break  # a return could skip what follows
        if isinstance(stmt, ast.Assert):
            edit = _negated(lines, stmt.test)
            if edit:
                found.append(Contradiction(edit, _mirrored_assert(lines, stmt.test, edit), claims_negatively(stmt),
                                           negates=True))
            found += [Contradiction(e, None, True) for e in _other_claims(lines, stmt.test)]
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
                stmt.value.func, ast.Attribute) and stmt.value.func.attr in OPPOSITE_METHODS:
            call = stmt.value.func
            edit = [Edit(call.end_lineno, call.end_col_offset - len(call.attr), call.end_lineno, call.end_col_offset,
                         OPPOSITE_METHODS[call.attr])]
            found.append(Contradiction(edit, _mirrored_method(lines, source, stmt.value), claims_negatively(stmt),
                                       negates=True))
            found += [Contradiction(e, None, True) for e in _other_method_claims(stmt.value)]
        elif isinstance(stmt, ast.With):
            other = _other_message(lines, stmt, source, rng)
            if other:
                found.append(Contradiction(other, None, True))
            others = _other_exception(lines, stmt, source, known)
            found += [Contradiction(edit, None, True, tell) for edit, tell in others]
            if not others and not other and (edit := _unwrapped(lines, stmt)):
                found.append(Contradiction(edit, None, False))
    return found


def claims_negatively(stmt: ast.stmt) -> bool:
    """An ``assert`` of a ``not``, ``!=``, ``is not`` or ``not in``, or a negative unittest assertion."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) or isinstance(test, ast.Compare) \
            and any(isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)) for op in test.ops)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        return bool(NEGATIVE_METHODS.search(stmt.value.func.attr))
    return False


def _other_types(node: ast.expr) -> list[str]:
    """The other ``DISJOINT_TYPES`` than the built-in type ``node`` names (none where it names none): one option
    each, ranked by the caller (how near the old file's statements each leaves the line)."""
    if not isinstance(node, ast.Name) or node.id not in DISJOINT_TYPES:
        return []
    return [t for t in DISJOINT_TYPES if t != node.id]


def _other_claims(lines: list[str], test: ast.expr) -> list[list[Edit]]:
    """Positive claims no program meets beside ``test``: ``a == b`` as ``a < b`` or ``a > b`` (false for equal values
    of an ordered type, a TypeError for an unordered one), ``isinstance(x, str)`` as ``isinstance(x, int)``."""
    out = []
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        span = _operator_span(lines, test)
        if span is not None:
            out += [[Edit(span[0], span[1], span[0], span[2], op)] for op in ("<", ">")]
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" \
            and len(test.args) == 2 and not test.keywords:
        kind = test.args[1]
        out += [[Edit(kind.lineno, kind.col_offset, kind.end_lineno, kind.end_col_offset, other)]
                for other in _other_types(kind)]
    return out


def _other_method_claims(call: ast.Call) -> list[list[Edit]]:
    """``assertEqual(a, b)`` as ``assertLess``/``assertGreater``, ``assertIsInstance(x, str)`` of another type."""
    name = call.func.attr
    head = call.func.end_col_offset - len(name)
    if name in ("assertEqual", "assertEquals") and len(call.args) >= 2:
        return [[Edit(call.func.end_lineno, head, call.func.end_lineno, call.func.end_col_offset, method)]
                for method in ("assertLess", "assertGreater")]
    if name == "assertIsInstance" and len(call.args) == 2:
        kind = call.args[1]
        return [[Edit(kind.lineno, kind.col_offset, kind.end_lineno, kind.end_col_offset, other)]
                for other in _other_types(kind)]
    return []


def _other_message(lines: list[str], stmt: ast.With, source: str, rng: random.Random) -> list[Edit] | None:
    """``pytest.raises(E, match="...")`` matching another message the file's own ``raises`` expect (neither a part
    of the other): the same exception, so neither the project's exception nor the ``raises`` tells it."""
    pattern = _match_literal(stmt)
    if pattern is None:
        return None
    others = {m.value for w in ast.walk(parsed(source)) if isinstance(w, ast.With)
              for m in [_match_literal(w)] if m is not None}
    # plain text only, and neither a part of the other: a message the real pattern finds is not found by another
    others = sorted(o for o in others if o and o not in pattern.value and pattern.value not in o
                    and not re.search(r"[.^$*+?{}\[\]\\|()]", o))
    if not others:
        return None
    quote = lines[pattern.lineno - 1].encode()[pattern.col_offset:pattern.col_offset + 1].decode()
    text = as_source(rng.choice(others), quote if quote in "'\"" else "'")
    return [Edit(pattern.lineno, pattern.col_offset, pattern.end_lineno, pattern.end_col_offset, text)]


def _match_literal(stmt: ast.With) -> ast.Constant | None:
    """The one-line string literal a ``raises(E, match=...)`` or ``assertRaisesRegex(E, ...)`` searches for."""
    if len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr, ast.Call):
        return None
    call = stmt.items[0].context_expr
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    found = next((k.value for k in call.keywords if k.arg in ("match", "expected_regex")), None)
    if found is None and name == "assertRaisesRegex" and len(call.args) >= 2:
        found = call.args[1]
    if name in RAISES and isinstance(found, ast.Constant) and isinstance(found.value, str) \
            and found.lineno == found.end_lineno:
        return found
    return None


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
    parts = [f"({_segment(lines, a)})" for a in call.args]
    row = _row(lines, call.lineno)
    head = call.func.end_col_offset - len(call.func.attr)
    text = row[:head] + f"assertFalse({form[1].format(*parts)})".encode() + row[call.end_col_offset:]
    return Edit(call.lineno, 0, call.lineno, len(row), text.decode())


UNRELATED_ERRORS = ("IndexError", "ZeroDivisionError", "FileNotFoundError", "RecursionError", "UnicodeDecodeError",
                    "NotImplementedError")
"""Built-in exceptions a project's own error class (whose bases a static reading cannot see) hardly derives from."""


def _other_exception(lines: list[str], stmt: ast.With, source: str, known: frozenset[str] = frozenset()
                     ) -> list[tuple[list[Edit], bool]]:
    """``with pytest.raises(E): body`` expecting another exception, one unrelated to ``E``: a body that raises
    ``E`` fails it, one that raises nothing too.  It keeps its ``raises`` (the bare body did not), so neither the
    word nor the negations tell it from its test.  One option per name, ranked by the caller: where ``E`` is a
    built-in, any built-in exception the file or the old file (``known``) names that is neither ``E``'s base nor
    derived from it (the old file's own ``raises(AttributeError)`` beside a real ``raises(ValueError)``: a twin's
    name as much the old file's as the real one's), and ``UNRELATED_ERRORS``; otherwise only ``UNRELATED_ERRORS``."""
    if len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr, ast.Call):
        return []
    call = stmt.items[0].context_expr
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in RAISES or not call.args or not isinstance(call.args[0], (ast.Name, ast.Attribute)) \
            or call.args[0].lineno != call.args[0].end_lineno:
        return []
    expected = getattr(builtins, _segment(lines, call.args[0]) or "", None)
    used = names_used(source) | known
    pool = set(UNRELATED_ERRORS)
    if isinstance(expected, type) and issubclass(expected, BaseException):
        pool |= {n for n in used if isinstance(getattr(builtins, n, None), type)
                 and issubclass(getattr(builtins, n), Exception) and not issubclass(getattr(builtins, n), Warning)
                 and getattr(builtins, n) not in BROAD_ERRORS}
    options = sorted(n for n in pool if not isinstance(expected, type)
                     or not (issubclass(getattr(builtins, n), expected) or issubclass(expected, getattr(builtins, n))))
    # a name of about the expected one's length: the copies' lengths are balanced by padding, a few pairs at most
    near = _segment(lines, call.args[0])
    options = [n for n in options if abs(len(n) - len(near)) <= 4] or options
    first = call.args[0]
    # a built-in where the real test expects the project's own exception tells the twin: used only when no other
    # contradiction of the test exists
    return [([Edit(first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, n)],
             not isinstance(expected, type)) for n in options]


BROAD_ERRORS = (Exception, BaseException, ArithmeticError, LookupError, OSError, EnvironmentError, IOError)
"""Bases of many exceptions: never a twin's expectation beside a built-in one."""


def _negated(lines: list[str], test: ast.expr) -> list[Edit] | None:
    """``a == b`` -> ``a != b`` (each comparison to its opposite), ``not x`` -> ``x``, otherwise ``not x``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        span = _operator_span(lines, test)
        return None if span is None else [Edit(span[0], span[1], span[0], span[2], OPPOSITE_OPS[type(test.ops[0])][1])]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and test.lineno == test.operand.lineno:
        return [Edit(test.lineno, test.col_offset, test.lineno, test.operand.col_offset, "")]
    if isinstance(test, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)):
        return [Edit(test.lineno, test.col_offset, test.lineno, test.col_offset, "not ("),
                Edit(test.end_lineno, test.end_col_offset, test.end_lineno, test.end_col_offset, ")")]
    return [Edit(test.lineno, test.col_offset, test.lineno, test.col_offset, "not ")]


def _operator_span(lines: list[str], test: ast.Compare) -> tuple[int, int, int] | None:
    """(line, start, end byte columns) of the one operator of ``test``, when it is written on one line, once."""
    if test.left.end_lineno != test.comparators[0].lineno:
        return None
    row = lines[test.left.end_lineno - 1].encode()
    gap = row[test.left.end_col_offset:test.comparators[0].col_offset].decode()
    pattern = OPPOSITE_OPS[type(test.ops[0])][0]
    edge = (r"(?<!\w)", r"(?!\w)") if pattern[0].isalpha() else (r"(?<![=!<>])", r"(?![=<>])")
    spans = [m.span() for m in re.finditer(edge[0] + pattern + edge[1], gap)]
    if len(spans) != 1:
        return None
    start = test.left.end_col_offset + len(gap[:spans[0][0]].encode())
    return test.left.end_lineno, start, start + len(gap[spans[0][0]:spans[0][1]].encode())


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

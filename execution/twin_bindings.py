"""Opaque bindings: where a test's copies differ by a value, every copy (the real one too) reads it through a name.

    spot = bindable(source, func, changes)      # the one span every twin's edit replaces, or None
    text + block({"_q3kx9a": "ValueError", "_b81mfe": "AttributeError"})   # the lines a file would need (views only)

A twin that expects another exception, type, message or literal differs from its test by that value alone, and a
reader who knows which values tests use most (ValueError, str, the literal the body repeats) names the real copy.
Here the value is replaced in every copy by a name drawn per grade (all alike: ``_`` and six letters or digits).
The names are never bound in the file: the runners bind them in the test module's namespace before its tests run
(``Twins.bindings`` travels in their arguments, which the kernel hides from the code under test:
``inbox/grader_sight.py``), so the copies' source on disk differs only in names drawn alike and holds no value.
``block`` writes the lines that would bind them at the file's end: only the measuring views use it
(``tests/twin_draws.py``).
"""

from __future__ import annotations

import ast
import random
import string
from typing import NamedTuple

from execution.twin_edits import Edit, source_lines

HEAD = string.ascii_lowercase
TAIL = string.ascii_lowercase + string.digits


class Spot(NamedTuple):
    """The span (1-based line, UTF-8 byte columns) every copy of one test differs in, and each copy's value there (the
    real copy's first), as the binding lines write it; each copy writes ``head + its name + tail`` there."""

    lineno: int
    col: int
    end_col: int
    values: list[str]
    head: str = ""
    tail: str = ""

    def edit(self, name: str) -> list[Edit]:
        return [Edit(self.lineno, self.col, self.lineno, self.end_col, self.head + name + self.tail)]


OPERATORS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Is: "is_",
             ast.IsNot: "is_not"}
"""A comparison's operator as the function of the ``operator`` module that computes it (same operands, same order)."""


def shaped(source: str, func: ast.FunctionDef, changes: list[list[Edit]]) -> Spot | None:
    """Where every twin changes one claim of one line by its operator or its assertion method only (``a == b`` beside
    ``a != b`` or ``a < b``, ``x`` beside ``not x``, ``assertEqual`` beside ``assertNotEqual``), that claim as every
    copy writes it: ``assert _k(a, b)`` with ``_k`` the ``operator`` function of each copy's claim
    (``operator.truth``/``operator.not_`` for a bare or negated one), ``getattr(self, _k)(a, b)`` with ``_k`` each
    copy's method name.  Every copy's line then has one shape, and what differs is bound like a value.  None where the
    copies differ otherwise (a value: ``bindable``; a message, a body run bare)."""
    if not changes or any(not c or any(e.lineno != c[0].lineno or e.end_lineno != e.lineno for e in c)
                          for c in changes) or len({c[0].lineno for c in changes}) != 1:
        return None
    lineno = changes[0][0].lineno
    row = source_lines(source)[lineno - 1].rstrip("\r\n").encode()
    if not func.lineno < lineno <= func.end_lineno:
        return None
    texts = [row]
    for change in changes:
        text = row
        for edit in sorted(change, key=lambda e: e.col, reverse=True):
            text = text[:edit.col] + edit.text.encode() + text[edit.end_col:]
        texts.append(text)
    forms = [_claim(text.decode()) for text in texts]
    if None in forms or len({(f[0], f[1], f[2]) for f in forms}) != 1:
        return None
    indent, head, tail, _ = forms[0]
    return Spot(lineno, len(row) - len(row.lstrip()), len(row), [f[3] for f in forms], head, tail)


def _claim(line: str) -> tuple[str, str, str, str] | None:
    """(the statement's code before the name, after it, the value) of a one-line claim written through a name, and
    its indent: ``assert _k(args)`` or ``getattr(receiver, _k)(args)``; None for any other statement."""
    code = line.lstrip()
    indent = line[:len(line) - len(code)]
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    if len(body) != 1 or code.rstrip() != code or "#" in code:
        return None
    stmt = body[0]

    def text(node: ast.AST) -> str:
        return code.encode()[node.col_offset:node.end_col_offset].decode()
    if isinstance(stmt, ast.Assert) and stmt.msg is None:
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in OPERATORS:
            args, value = [test.left, test.comparators[0]], f"operator.{OPERATORS[type(test.ops[0])]}"
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            args, value = [test.operand], "operator.not_"
        else:
            args, value = [test], "operator.truth"
        if any(isinstance(a, ast.Starred) for a in args):
            return None
        return indent, "assert ", f"({', '.join(text(a) for a in args)})", value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr.startswith("assert"):
        call = stmt.value
        receiver = text(call.func.value)
        rest = code.encode()[call.func.end_col_offset:call.end_col_offset].decode()
        if code.encode()[call.end_col_offset:].strip():
            return None
        return indent, f"getattr({receiver}, ", f"){rest}", repr(call.func.attr)
    return None


def bindable(source: str, func: ast.FunctionDef, changes: list[list[Edit]]) -> Spot | None:
    """The span when every twin's change is one edit of the same one-line span that is an expression of the test (not
    an attribute's name, not an operator), and the real text there and each twin's read the same at the end of the
    module as in the test: a literal, or a name (dotted or not) the test does not bind itself.  None otherwise (an
    operator, a method, a negation, a body run bare)."""
    if not changes or any(len(c) != 1 for c in changes):
        return None
    first = changes[0][0]
    if first.lineno != first.end_lineno or any((c[0].lineno, c[0].col, c[0].end_lineno, c[0].end_col) !=
                                               (first.lineno, first.col, first.end_lineno, first.end_col)
                                               for c in changes):
        return None
    if not any(isinstance(n, (ast.Constant, ast.Name, ast.Attribute)) and (n.lineno, n.end_lineno, n.col_offset,
               n.end_col_offset) == (first.lineno, first.lineno, first.col, first.end_col) for n in ast.walk(func)):
        return None
    row = source_lines(source)[first.lineno - 1].rstrip("\r\n").encode()
    local = _bound_in(func)
    values = [_value(text, local) for text in [row[first.col:first.end_col].decode(), *(c[0].text for c in changes)]]
    if None in values:
        return None
    return Spot(first.lineno, first.col, first.end_col, values)


def _bound_in(func: ast.FunctionDef) -> set[str]:
    """Names the function binds (parameters, assignments, imports, handlers): a binding at module level sees none."""
    args = func.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg,
                                                                                            args.kwarg])]}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not func:
            names.add(node.name)
    return names


def _value(text: str, local: set[str]) -> str | None:
    """``text`` as a binding line writes it: a literal by ``repr`` (every copy's alike: how the file or a twin wrote
    it, ``0xB1``, ``r"..."``, would tell them apart), a name as it is, where the module's last line reads it as the
    test did; None where it does not."""
    try:
        expr = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(expr, ast.Constant):
        written = repr(expr.value)
        try:
            same = type(ast.literal_eval(written)) is type(expr.value) and ast.literal_eval(written) == expr.value
        except (ValueError, SyntaxError):
            same = False
        return written if same else text.strip()
    root = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    return text.strip() if isinstance(root, ast.Name) and root.id not in local else None


def bound_name(rng: random.Random, taken: set[str], source: str) -> str:
    """A fresh name, ``_`` and six letters or digits, that ``source`` does not hold and no other binding took."""
    while True:
        name = "_" + rng.choice(HEAD) + "".join(rng.choice(TAIL) for _ in range(5))
        if name not in taken and name not in source:
            taken.add(name)
            return name


def block(bound: dict[str, str]) -> str:
    """The binding lines a file would hold after its last line (sorted by name): what a reader who resolved the names
    would read; never laid in a graded file."""
    return "\n\n" + "".join(f"{name} = {bound[name]}\n" for name in sorted(bound))

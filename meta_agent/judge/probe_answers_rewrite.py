"""Rewrites of Python code that change its syntax tree and keep what it does, for the probe's wrong SWE patches.

A wrong patch made only of re-spelled lines keeps the syntax tree line for line, and a reward that spares such
patches passes the probe (issue 45, held-out set b, attack 1): a policy's wrong patches change code.  No SWE test
runs in the probe, so a wrong patch's record (FAIL_TO_PASS fails, PASS_TO_PASS passes) must be true by
construction: every rewrite here is one whose behaviour is the same by the language's rules, inside a function
(a new name there is a local, never a module or class attribute), with a name the file never uses:

- ``return EXPR`` -> ``NAME = EXPR`` then ``return NAME`` (the value is computed once, as before);
- ``if COND:`` -> ``NAME = COND`` then ``if NAME:`` (``bool`` is applied to the same value once, as before);
- ``return A if C else B`` -> ``if C:`` ``return A`` then ``return B``;
- a function that falls off its end gets an explicit ``return None`` (what falling off returns).

    edits = rewrite_sites(source)                  # 0-based line -> how it may be rewritten
    lines = edits[12](source_lines, rng)           # the replacement lines for line 12
"""

from __future__ import annotations

import ast
import random
import re
from typing import Callable

Rewrite = Callable[[list[str], random.Random], list[str]]
_REFLECTIVE = re.compile(r"\b(locals|vars|exec|eval)\(|_getframe|inspect\.")
_NAMES = {"value": ("result", "value", "out", "res", "ret", "retval"),
          "test": ("ok", "cond", "flag", "matched", "check", "is_set")}


def rewrite_sites(source: str) -> dict[int, Rewrite]:
    """Per 0-based line of ``source`` that one rewrite can change, the rewrite ({} when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    used = set(re.findall(r"\w+", source))
    lines = source.splitlines(keepends=True)
    sites: dict[int, Rewrite] = {}
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if _REFLECTIVE.search("".join(lines[func.lineno - 1:func.end_lineno])):
            continue  # a function that reads its own frame would see the new local
        for node in _own_statements(func):
            at = node.lineno - 1
            head_end = node.test.end_lineno if isinstance(node, ast.If) else node.end_lineno
            if head_end != node.lineno or at >= len(lines) or ";" in lines[at]:
                continue  # one line's statement (an ``if``: its header), never two statements on a line
            if isinstance(node, ast.Return) and isinstance(node.value, ast.IfExp):
                sites[at] = _unfold_ifexp(node, lines[at])
            elif isinstance(node, ast.Return) and node.value is not None and not _trivial(node.value):
                sites[at] = _named(lines[at], r"(\s*)return\s+(.+?)\s*$", "value", used, "return {n}")
            elif isinstance(node, ast.If) and lines[at].lstrip().startswith("if ") and not _trivial(node.test):
                sites[at] = _named(lines[at], r"(\s*)if\s+(.+?)\s*:\s*$", "test", used, "if {n}:")
        last = func.body[-1]
        if not isinstance(last, (ast.Return, ast.Raise)) and last.end_lineno - 1 not in sites \
                and last.lineno > func.lineno and last.end_lineno - 1 < len(lines):
            sites[last.end_lineno - 1] = _return_none(lines[last.end_lineno - 1], last.col_offset)
    return {at: fix for at, fix in sites.items() if fix is not None}


def _own_statements(func: ast.AST) -> list[ast.stmt]:
    """The statements of ``func``'s body, its blocks' included, not those of functions or classes inside it."""
    out, todo = [], list(func.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            todo += [n for n in getattr(node, name, []) if isinstance(n, ast.stmt)]
        todo += [s for h in getattr(node, "handlers", []) for s in h.body]
    return out


def _trivial(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Constant))


def _fresh(kind: str, used: set[str], rng: random.Random) -> str:
    names = [n for n in _NAMES[kind] if n not in used]
    name = rng.choice(names) if names else rng.choice(_NAMES[kind]) + "_"
    while name in used:
        name += "_"
    return name


def _named(line: str, pattern: str, kind: str, used: set[str], then: str) -> Rewrite | None:
    found = re.match(pattern, line.rstrip("\n"))
    if found is None or "#" in found.group(2):
        return None
    indent, expr = found.group(1), found.group(2)

    def apply(_lines: list[str], rng: random.Random) -> list[str]:
        name = _fresh(kind, used, rng)
        return [f"{indent}{name} = {expr}\n", f"{indent}{then.format(n=name)}\n"]
    try:  # the expression must stand alone as a value (never a starred or walrus form that only its place allows)
        ast.parse(f"x = {expr}")
    except SyntaxError:
        return None
    return apply


def _unfold_ifexp(node: ast.Return, line: str) -> Rewrite | None:
    indent = line[:len(line) - len(line.lstrip())]
    value = node.value
    assert isinstance(value, ast.IfExp)
    parts = [ast.get_source_segment(line.lstrip(), _shifted(n, len(indent))) for n in (value.test, value.body,
                                                                                        value.orelse)]
    if any(p is None for p in parts):
        return None
    test, body, orelse = parts
    return lambda _lines, _rng: [f"{indent}if {test}:\n", f"{indent}    return {body}\n", f"{indent}return {orelse}\n"]


def _shifted(node: ast.AST, by: int) -> ast.AST:
    """``node``'s position on its line with the line's indent cut (``get_source_segment`` over the bare line)."""
    copy = ast.Constant(0)
    copy.lineno, copy.end_lineno = 1, 1
    copy.col_offset, copy.end_col_offset = node.col_offset - by, node.end_col_offset - by
    return copy


def _return_none(line: str, col: int) -> Rewrite:
    def apply(_lines: list[str], _rng: random.Random) -> list[str]:
        return [line if line.endswith("\n") else line + "\n", " " * col + "return None\n"]
    apply.inserts = True  # type: ignore[attr-defined]  # adds a line, replaces none: never a patch's only place
    return apply


def replaces(rewrite: Rewrite) -> bool:
    """Whether ``rewrite`` replaces its line (a diff shows it removed), rather than only adding one after it."""
    return not getattr(rewrite, "inserts", False)

"""Where a deciding test is in its source and what it expects: the function (a module-level test, a method of a
top-level class, or one a class inherits from a mixin in the same file or an imported one) and the literal its
decisive assertion compares against (directly, or through a helper that asserts its argument), which a twin
then changes.  Read by ``execution.twins``; nothing here draws or writes."""

from __future__ import annotations

import ast
from pathlib import Path

from execution.twin_edits import parsed

ASSERT_EQUAL = frozenset({"assertEqual", "assertEquals", "assertListEqual", "assertTupleEqual", "assertDictEqual",
                          "assertSetEqual", "assertSequenceEqual", "assertMultiLineEqual"})


def locate(repo: Path, node: str, texts: dict[str, str]):
    """(path, scope, FunctionDef) of a module-level test or a method of a top-level class, or None."""
    path, *scopes = node.split("::")
    if not scopes or len(scopes) > 2 or not path.endswith(".py") or not (repo / path).is_file():
        return None
    if path not in texts:
        texts[path] = (repo / path).read_text()
    try:
        tree = parsed(texts[path])
    except SyntaxError:
        return None
    scope: ast.AST = tree
    if len(scopes) == 2:
        scope = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == scopes[0]), None)
        if scope is None:
            return None
    name = scopes[-1].split("[")[0]
    func = next((n for n in scope.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if func is None and isinstance(scope, ast.ClassDef):
        return _inherited(repo, path, tree, scope, name, texts)
    if func is None or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(func)):
        return None
    return path, scope, func


def _inherited(repo: Path, path: str, tree: ast.Module, cls: ast.ClassDef, name: str, texts: dict[str, str]):
    """(path, mixin class, FunctionDef) of test ``name`` that ``cls`` inherits from a base class defined in the same
    file or imported by a relative import (``from . import CacheTestMixin``), one level up; None otherwise.  Its
    twins are laid into the mixin, so every class that inherits the test inherits them too."""
    for base in cls.bases:
        if not isinstance(base, ast.Name):
            continue
        where = path
        if not any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
            source = next((n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1
                           and any((a.asname or a.name) == base.id and a.name == base.id for a in n.names)), None)
            if source is None:
                continue
            folder = str(Path(path).parent)
            where = f"{folder}/{source.module.replace('.', '/')}.py" if source.module else f"{folder}/__init__.py"
        found = locate(repo, f"{where}::{base.id}::{name}", texts)
        if found is not None:
            return found
    return None


def expected_literal(func: ast.FunctionDef, module: ast.Module | None = None) -> ast.Constant | None:
    """The first literal a top-level equality assertion of ``func`` compares with (reached by every pass), directly
    or as the argument of a helper of the module or of ``func`` that asserts its parameter equal to something."""
    return next(expected_literals(func, module), None)


def expected_literals(func: ast.FunctionDef, module: ast.Module | None = None):
    """Every literal ``expected_literal`` could take, in order (one per top-level assertion)."""
    helpers = {n.name: n for n in [*(module.body if module else []), *func.body] if isinstance(n, ast.FunctionDef)}
    for stmt in func.body:
        if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
            return  # a return before the assertion could skip it
        sides: list[ast.AST] = []
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1 \
                and isinstance(stmt.test.ops[0], ast.Eq):
            sides = [stmt.test.comparators[0], stmt.test.left]
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
                stmt.value.func, ast.Attribute) and stmt.value.func.attr in ASSERT_EQUAL and len(stmt.value.args) >= 2:
            sides = [stmt.value.args[1], stmt.value.args[0]]
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
                and stmt.value.func.id in helpers:
            sides = [_helper_expectation(helpers[stmt.value.func.id], stmt.value)]
        for side in sides:
            if isinstance(side, ast.Constant) and type(side.value) in (str, bytes, int, float) \
                    and side.lineno == side.end_lineno:
                yield side
                break


def _helper_expectation(helper: ast.FunctionDef, call: ast.Call) -> ast.AST | None:
    """The argument of ``call`` that ``helper`` asserts, at its top level, equal to an expression not made from it
    (or ``str()``/``repr()`` of it equal to one), directly or in both branches of an ``if`` (each branch asserts it:
    whichever runs, the argument is compared)."""
    params = [a.arg for a in [*helper.args.posonlyargs, *helper.args.args]]
    for stmt in helper.body:
        if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in params for n in ast.walk(stmt)):
            return None  # a rebinding: the assertion may compare something else
        if isinstance(stmt, ast.If):
            found = {_asserted_param(stmt.body, params), _asserted_param(stmt.orelse, params)}
            if len(found) != 1 or None in found:
                return None  # a branch that does not compare the same argument: it may be skipped
            name = found.pop()
        elif isinstance(stmt, (ast.Return, ast.For, ast.While, ast.Try, ast.With)):
            return None  # a loop or an early return: the assertion may be skipped
        else:
            name = _asserted_param([stmt], params)
            if name is None:
                continue
        index = params.index(name)
        if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            return call.args[index]
        return next((k.value for k in call.keywords if k.arg == name), None)
    return None


def _asserted_param(body: list[ast.stmt], params: list[str]) -> str | None:
    """The parameter the first top-level ``assert a == b`` of ``body`` compares (as itself, or through ``str``/
    ``repr``) with an expression not made from it; None when there is none before a branch, loop or return."""
    for stmt in body:
        if isinstance(stmt, (ast.Return, ast.If, ast.For, ast.While, ast.Try, ast.With)):
            return None
        if not (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1
                and isinstance(stmt.test.ops[0], ast.Eq)):
            continue
        for mine, other in ((stmt.test.comparators[0], stmt.test.left), (stmt.test.left, stmt.test.comparators[0])):
            if isinstance(mine, ast.Call) and isinstance(mine.func, ast.Name) and mine.func.id in ("str", "repr") \
                    and len(mine.args) == 1 and not mine.keywords:
                mine = mine.args[0]
            if isinstance(mine, ast.Name) and mine.id in params and not any(
                    isinstance(n, ast.Name) and n.id == mine.id for n in ast.walk(other)):
                return mine.id
    return None


def class_names(repo: Path, path: str, cls: str, texts: dict[str, str], seen: frozenset = frozenset()) -> set[str]:
    """Every method name class ``cls`` of ``path`` has, its own and those its bases (in the same file, or imported by a
    relative import, as ``_inherited`` finds them) give it: a twin drawn under one of them would hide that test."""
    if (path, cls) in seen or not (repo / path).is_file():
        return set()
    texts.setdefault(path, (repo / path).read_text())
    try:
        tree = parsed(texts[path])
    except SyntaxError:
        return set()
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if found is None:
        return set()
    names = {n.name for n in found.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for base in found.bases:
        if not isinstance(base, ast.Name):
            continue
        where = path
        if not any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
            source = next((n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1
                           and any(a.name == base.id for a in n.names)), None)
            if source is None:
                continue
            folder = str(Path(path).parent)
            where = f"{folder}/{source.module.replace('.', '/')}.py" if source.module else f"{folder}/__init__.py"
        names |= class_names(repo, where, base.id, texts, seen | {(path, cls)})
    return names

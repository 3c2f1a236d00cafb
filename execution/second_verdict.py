"""The second verdict's host side: which deciding tests a runner that is not pytest can run, and the comparison.

    runnable, unverifiable = plain_tests(repo, nodes)       # from the trusted (graded) test files' AST
    files["plain.json"] = json.dumps({"repo": "/repo", "site": SITE, "tests": runnable})
    # plan run: python3 -I -B /grader/grader_plain.py /grader/plain.json
    findings = disagreements(pytest_outcomes, plain_outcomes)

A test is runnable without pytest when nothing pytest would add can change its outcome: a module-level
function or a method of a top-level class, defined in that class (not inherited), with no parameter
without a default but ``self``, no decorator, not async or a generator, in a module without ``pytestmark``, xunit
``setup_*``/``teardown_*`` functions, ``setUpModule`` or an autouse fixture, under no ``conftest.py``
that defines an autouse fixture or a hook.  A class is a ``unittest.TestCase`` (any base named
``...TestCase``: ``setUp``/``tearDown`` are called) or a plain class without set-up methods or
``__init__``.  Every other deciding test is ``unverifiable``: the grade then rests on the other layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

XUNIT = frozenset({"setup_module", "teardown_module", "setup_function", "teardown_function", "setUpModule",
                   "tearDownModule", "setup", "teardown"})
CLASS_SETUP = frozenset({"setup_method", "teardown_method", "setup_class", "teardown_class", "setup", "teardown",
                         "__init__", "__new__", "run", "__call__"})


def plain_tests(repo: Path, nodes: list[str]) -> tuple[list[dict], list[str]]:
    """(runnable tests as ``{"node", "path", "cls", "name"}``, unverifiable node ids) among ``nodes``."""
    runnable, unverifiable, trees = [], [], {}
    for node in nodes:
        spec = _runnable(repo, node, trees)
        if spec is None:
            unverifiable.append(node)
        else:
            runnable.append(spec)
    return runnable, unverifiable


def disagreements(pytest_outcomes: dict[str, str], plain: dict[str, str]) -> list[str]:
    """Each test pytest reported passed that did not pass in the fresh process (the forging direction)."""
    return [f"second verdict: {node} passed under pytest but {plain.get(node, 'missing')} in a fresh process "
            "without pytest" for node, outcome in pytest_outcomes.items()
            if node in plain and outcome == "passed" and plain[node] != "passed"]


def _runnable(repo: Path, node: str, trees: dict) -> dict | None:
    path, *scopes = node.split("::")
    if not scopes or len(scopes) > 2 or "[" in scopes[-1] or not path.endswith(".py"):
        return None
    tree = _tree(repo / path, trees)
    if tree is None or not _plain_module(tree) or not _plain_conftests(repo, path, trees):
        return None
    scope: ast.AST = tree
    cls = ""
    if len(scopes) == 2:
        scope = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == scopes[0]), None)
        if scope is None or scope.decorator_list or not _plain_class(scope):
            return None
        cls = scope.name
    func = next((n for n in scope.body if isinstance(n, ast.FunctionDef) and n.name == scopes[-1]), None)
    if func is None or func.decorator_list or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(func)):
        return None
    args = func.args
    required = len(args.posonlyargs) + len(args.args) - len(args.defaults)  # defaults are no fixtures to pytest
    if required != (1 if cls else 0) or any(d is None for d in args.kw_defaults):
        return None
    return {"node": node, "path": path, "cls": cls, "name": func.name}


def _tree(path: Path, trees: dict) -> ast.Module | None:
    if path not in trees:
        try:
            trees[path] = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            trees[path] = None
    return trees[path]


def _plain_module(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in XUNIT:
            return False
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id in ("pytestmark", "pytest_plugins")
                for t in getattr(stmt, "targets", [getattr(stmt, "target", None)])):
            return False
    return not _autouse(tree)


def _plain_class(cls: ast.ClassDef) -> bool:
    unittest = any((b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")).endswith("TestCase")
                   for b in cls.bases)
    names = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    marked = any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
                 for n in cls.body)
    if marked:
        return False
    if unittest:
        return not (names & {"run", "__call__", "__init__"})
    return not cls.bases and not (names & CLASS_SETUP)


def _plain_conftests(repo: Path, path: str, trees: dict) -> bool:
    parts = path.split("/")[:-1]
    for depth in range(len(parts) + 1):
        conftest = repo.joinpath(*parts[:depth], "conftest.py")
        if conftest.is_file():
            tree = _tree(conftest, trees)
            if tree is None or _autouse(tree) or any(
                    isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("pytest_")
                    for n in tree.body):
                return False
    return True


def _autouse(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.keyword) and n.arg == "autouse" for n in ast.walk(tree))

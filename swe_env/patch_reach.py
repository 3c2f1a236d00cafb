"""Static refusal of reflective reach in the code a patch adds or changes (AST, before anything runs).

    problems = reach_problems(base, patched)      # [] or ["pkg/__init__.py:12: frame access (f_back)", ...]
    problems = source_problems(new_text, old_text, "pkg/mod.py")

A fix for a bug in a library has no need to look at the interpreter that runs it: frames, ``gc``,
``sys.modules``, pytest/pluggy/unittest internals, ``/proc``, ``ctypes``, closures and code objects,
attribute names computed at run time, ``__import__``/``importlib``, ``exec``/``eval``/``compile``,
or format strings that walk attributes.  Every one of them is how a patch reaches the grader that
runs beside it, so a patch whose added or changed lines use one is ``rejected`` before any of its
code runs, with the file and line named.  Only lines the patch adds or changes are judged: a
library's own reflective code (a helper it already had) is not the patch's doing.

This is a deny-list over the AST, not a proof: a string assembled at run time and handed to an
existing helper of the library can still slip through.  It raises the cost of forgery in front of
the run-time layers (``execution/README.md``), it does not replace them.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

FORBIDDEN_MODULES = frozenset({
    "gc", "inspect", "ctypes", "_ctypes", "importlib", "imp", "_imp", "_pytest", "pytest", "pluggy", "unittest",
    "marshal", "_pickle", "code", "codeop", "runpy", "pdb", "bdb", "faulthandler", "tracemalloc", "_thread",
    "_posixsubprocess", "posix", "_testcapi", "_testinternalcapi", "sysconfig", "grader_audit", "grader_channel",
    "grader_identity", "grader_parent", "test_runner", "mmap", "resource", "_weakref", "_abc",
})
"""Modules whose only use to a patch is reaching the interpreter or the grader."""
REACH_ATTRS = frozenset({
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "f_lasti", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "_getframe", "_current_frames",
    "settrace", "setprofile", "addaudithook", "walk_stack", "walk_tb", "currentframe", "cell_contents",
    "co_code", "co_consts", "co_filename", "co_names", "get_objects", "get_referrers", "get_referents",
    "pluginmanager", "_conftest_plugins", "hook", "ihook", "_excinfo", "_outcome", "_config",
})
"""Attribute names that reach frames, code, closures or pytest's live objects (whatever the base)."""
SYS_ATTRS = frozenset({"modules", "meta_path", "path_hooks", "path_importer_cache", "breakpointhook", "excepthook",
                       "unraisablehook", "displayhook", "audit", "setrecursionlimit", "setswitchinterval"})
"""``sys.<name>``: the import system and the interpreter's hooks (``sys._anything`` is refused too)."""
ALLOWED_DUNDERS = frozenset({
    "__name__", "__qualname__", "__doc__", "__module__", "__class__", "__dict__", "__wrapped__", "__init__",
    "__new__", "__slots__", "__annotations__", "__file__", "__all__", "__version__", "__eq__", "__ne__", "__lt__",
    "__le__", "__gt__", "__ge__", "__hash__", "__repr__", "__str__", "__bytes__", "__format__", "__len__",
    "__iter__", "__next__", "__contains__", "__getitem__", "__setitem__", "__delitem__", "__enter__", "__exit__",
    "__aenter__", "__aexit__", "__get__", "__set__", "__delete__", "__call__", "__bool__", "__int__", "__float__",
    "__index__", "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__neg__",
    "__pos__", "__abs__", "__invert__", "__and__", "__or__", "__xor__", "__radd__", "__rsub__", "__rmul__",
    "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__", "__missing__",
    "__post_init__", "__set_name__", "__init_subclass__", "__class_getitem__", "__fspath__", "__round__",
    "__reversed__", "__sizeof__", "__instancecheck__", "__subclasscheck__", "__dataclass_fields__",
    "__match_args__", "__getattr__", "__setattr__", "__delattr__", "__length_hint__", "__await__", "__aiter__",
    "__anext__", "__future__",
})
"""Dunder attributes ordinary library code reads or defines; any other (``__globals__``, ``__code__``,
``__closure__``, ``__subclasses__``, ``__mro__``, ``__builtins__``, ``__self__``...) is reach."""
DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "__import__", "breakpoint"})
NAME_TAKERS = {"getattr": 1, "setattr": 1, "delattr": 1, "hasattr": 1}
"""Builtins that take an attribute name (argument index): the name must be a literal."""
NAMESPACE_READS = frozenset({"get", "pop", "setdefault"})
"""Methods reading an object's namespace (``vars(o)``, ``o.__dict__``) by key: the key must be a literal, as an
attribute name given to ``getattr`` must (a key built at run time reads ``__globals__`` through a descriptor)."""
SAFE_CODECS = frozenset({"utf-8", "utf8", "ascii", "us-ascii", "latin-1", "latin1", "iso-8859-1", "iso8859-1",
                         "utf_8", "iso-8859-15", "cp1252"})
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_FORMAT_FIELD = re.compile(r"\{[^{}!:]*[.\[][^{}]*\}")
_PROC = re.compile(r"/proc(/|$)|/dev/fd|/dev/mem|/dev/kmem|^proc$")


def reach_problems(base: Path, patched: Path) -> list[str]:
    """Reach in every ``.py`` file of ``patched`` that is new or differs from ``base``, as ``path:line: why``."""
    problems = []
    for path in sorted(patched.rglob("*.py")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(patched).as_posix()
        old = base / rel
        new_bytes = path.read_bytes()
        old_bytes = old.read_bytes() if old.is_file() else b""
        if new_bytes != old_bytes:
            problems += source_problems(new_bytes, old_bytes, rel)
    return problems


def source_problems(new: str | bytes, old: str | bytes, rel: str) -> list[str]:
    """Reach on the lines of ``new`` that are not in ``old`` (all of them for a new file)."""
    new_b = new.encode() if isinstance(new, str) else new
    old_b = old.encode() if isinstance(old, str) else old
    codec = _codec(new_b)
    if codec is not None and codec.lower().replace("_", "-") not in SAFE_CODECS | {"utf-8"}:
        return [f"{rel}:1: source encoding {codec!r} (code can hide in an unusual codec)"]
    try:
        tree = ast.parse(new_b, filename=rel)  # bytes: the AST is what Python itself would run
    except (SyntaxError, ValueError):
        return []  # code that does not compile cannot reach anything; its tests will fail
    text_new = new_b.decode("utf-8", "replace").splitlines()
    text_old = old_b.decode("utf-8", "replace").splitlines()
    changed = _changed_lines(text_old, text_new)
    found = []
    for line, why in _Reach().run(tree):
        if line in changed:
            found.append(f"{rel}:{line}: {why}")
    return sorted(set(found), key=lambda s: (int(s.split(":")[1]), s))


def _codec(source: bytes) -> str | None:
    for line in source.splitlines()[:2]:
        if match := _CODING.match(line):
            return match.group(1).decode("ascii", "replace")
    return None


def _changed_lines(old: list[str], new: list[str]) -> set[int]:
    """1-based numbers of the lines of ``new`` that are added or changed relative to ``old``."""
    changed: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
    return changed


class _Reach(ast.NodeVisitor):
    """Collects (line, why) for every node that reaches; a node spanning lines is reported on each of them."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.sys_names: set[str] = set()

    def run(self, tree: ast.AST) -> list[tuple[int, str]]:
        for node in ast.walk(tree):  # first the names ``sys`` is bound to, anywhere in the file
            if isinstance(node, ast.Import):
                self.sys_names.update(a.asname or a.name for a in node.names if a.name == "sys")
        self.visit(tree)
        return self.found

    def flag(self, node: ast.AST, why: str) -> None:
        first = getattr(node, "lineno", 1)
        last = getattr(node, "end_lineno", None) or first
        self.found += [(line, why) for line in range(first, last + 1)]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                self.flag(node, f"import of {alias.name} (interpreter or grader internals)")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0 and module.split(".")[0] in FORBIDDEN_MODULES:
            self.flag(node, f"import from {module} (interpreter or grader internals)")
        for alias in node.names:
            if module == "sys" and (alias.name.startswith("_") or alias.name in SYS_ATTRS | REACH_ATTRS):
                self.flag(node, f"from sys import {alias.name}")
            elif module == "builtins" and alias.name in DYNAMIC_CALLS | set(NAME_TAKERS):
                self.flag(node, f"from builtins import {alias.name}")
            elif alias.name in REACH_ATTRS or _bad_dunder(alias.name):
                self.flag(node, f"import of {alias.name} from {module or '.'}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in REACH_ATTRS:
            self.flag(node, f"reflective attribute .{attr}")
        elif _bad_dunder(attr):
            self.flag(node, f"dunder attribute .{attr} (not in the allow-list)")
        elif isinstance(node.value, ast.Name) and node.value.id in self.sys_names and (
                attr.startswith("_") or attr in SYS_ATTRS):
            self.flag(node, f"sys.{attr}")
        elif isinstance(node.value, ast.Name) and node.value.id in ("builtins", "__builtins__") and (
                attr in DYNAMIC_CALLS or attr in NAME_TAKERS):
            self.flag(node, f"builtins.{attr}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in DYNAMIC_CALLS:
            self.flag(node, f"{node.id} (code built at run time)")
        elif _bad_dunder(node.id) and node.id not in ("__spec__", "__path__", "__loader__", "__package__"):
            self.flag(node, f"dunder name {node.id}")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and _namespace(node.value) and not _literal(node.slice):
            self.flag(node, "a namespace (vars() or __dict__) read by a computed key")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in NAMESPACE_READS and _namespace(func.value) and not (
                node.args and _literal(node.args[0])):
            self.flag(node, f"a namespace (vars() or __dict__) read by a computed key (.{func.attr})")
        if isinstance(func, ast.Name) and func.id in NAME_TAKERS:
            index = NAME_TAKERS[func.id]
            name = node.args[index] if len(node.args) > index else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.flag(node, f"{func.id} with a computed attribute name")
        elif isinstance(func, ast.Attribute) and func.attr in ("format", "format_map") and isinstance(
                func.value, ast.Constant) and isinstance(func.value.value, str) and _FORMAT_FIELD.search(
                func.value.value):
            self.flag(node, "format string with attribute or index access in a field")
        elif isinstance(func, ast.Name) and func.id in ("attrgetter", "methodcaller") or (
                isinstance(func, ast.Attribute) and func.attr in ("attrgetter", "methodcaller", "Formatter")):
            self.flag(node, "attribute access by a name held in data (attrgetter/methodcaller/Formatter)")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, str):
            if _PROC.search(value):
                self.flag(node, f"path into /proc or /dev/fd ({value[:40]!r})")
            elif value in REACH_ATTRS or value in FORBIDDEN_MODULES - {"code", "posix", "resource"} or _bad_dunder(
                    value) or (value.startswith("_") and value[1:] in ("getframe", "current_frames")):
                self.flag(node, f"string naming reach ({value!r})")


def _namespace(node: ast.AST) -> bool:
    """``vars(...)`` or ``<anything>.__dict__``: an object's attributes as a mapping."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars") or (
        isinstance(node, ast.Attribute) and node.attr == "__dict__")


def _literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _bad_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS

"""A static reading of what a harness's code reads of a response: its patterns, literals and counts.

Five held-out sets (issue 45, a to e) each won by paying a wrong answer in a shape the audit or the probe never
wrote (a decimal, a fraction that is no whole number, five values on a line, a repeat with other words between,
git's ``\\ No newline at end of file``, a ```` ```patch ```` fence); each fix added one more shape and the next set
won again.  A reward that pays a wrong answer only in a shape it names itself names that shape in its code.  This
module reads it there, from the harness's Python source (trusted host code reading text: the source is parsed,
never run), and the audit (``judge.audit_reading``) and the SWE sweep (``judge.probe_sweep``) then write wrong
answers that wear each feature read and answers that lack it:

- **patterns**: the first argument of a call named like one of :mod:`re`'s (``search``, ``findall``, ``compile``,
  ... whatever the module is called), with its flags where they are spelled ``re.I``/``re.IGNORECASE``-like;
- **literals**: other string constants of the code (docstrings, subscripts, dict keys and ``get``'s keys left
  out): what ``in``, ``count``, ``startswith``, ``==`` or a set of allowed texts compare a response with;
- **counts**: integers 2 to :data:`MAX_COUNT` an ``if`` compares with (``len(found) >= 5``), each with the patterns
  and literals of the function it is in (``Use``), so a count is crossed with what it counts; a function reading
  two features or more gives a ``Use`` of count 1 (its features worn together).

A name bound at module level to a constant, a tuple of constants or a compiled pattern is read where a function
uses it (a count held in one, ``> _LIMIT``, too), and a function's features include those of the module-level
functions it calls, one call deep (a reward splitting what it pays over two helpers).  ``"Ans" + "wer"``,
``"=" * 3``, names of names and f-strings whose parts are all constants (``rf"Answer:\\s*{_NUM}%"``) are folded (an
f-string that is not gives its constant parts as literals); anything computed otherwise (``chr``, ``base64``, a string
reversed) is not read: such a reward still meets the audit's and the probe's drawn shapes, and nothing more
(``docs/gate-contexts.md``).  A hostile source costs bounded work: at most :data:`MAX_SOURCE_CHARS` of it is
parsed, a parse that fails (or recurses too deep) reads nothing of that file, a reading stops after
:data:`MAX_VISITS` node visits (what it read by then stands), and each list is capped.

    reading = read_source(Path("harness/reward.py").read_text())
    reading.patterns[0], reading.literals[:2], reading.uses[0].count     # ("Answer:\\s*(\\d+)", 0), (...), 5
"""

from __future__ import annotations

import ast
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

from harness_repo.repo import SEEDS_DIR, HarnessRepo

MAX_SOURCE_CHARS = 200_000
"""Python source read per harness at most (every ``.py`` file, in path order, until this is spent)."""
MAX_VISITS = 200_000
"""Syntax-tree nodes one source's reading visits at most (a function's walk and each name it reads count)."""
MAX_PATTERNS = 32
MAX_LITERALS = 64
MAX_USES = 16
MAX_COUNT = 12
"""Counts above this are not crossed (a line of 13 values is no shape a policy writes)."""
MAX_FOLD_DEPTH = 8
"""Nodes one constant is folded through at most (``A = B + "x"``, ``B = C``, ...)."""
MAX_LITERAL_CHARS = 120
MAX_PATTERN_CHARS = 300
_RE_CALLS = {"search", "match", "fullmatch", "findall", "finditer", "compile", "sub", "subn", "split"}
_TEXT_METHODS = {"count", "startswith", "endswith", "find", "rfind", "index", "rindex", "split", "rsplit",
                 "partition", "rpartition", "replace", "removeprefix", "removesuffix"}
_FLAGS = {"I": re.I, "IGNORECASE": re.I, "M": re.M, "MULTILINE": re.M, "S": re.S, "DOTALL": re.S,
          "X": re.X, "VERBOSE": re.X}


class Pattern(NamedTuple):
    """A regular expression a harness applies, with the flags it spells out."""

    text: str
    flags: int = 0


class Use(NamedTuple):
    """A count one function compares with (1: none, the features are read together), and the patterns and
    literals that function reads."""

    count: int
    patterns: tuple[Pattern, ...]
    literals: tuple[str, ...]


class Reading(NamedTuple):
    """What a harness's code reads of a response (module docstring); empty: nothing read."""

    patterns: tuple[Pattern, ...] = ()
    literals: tuple[str, ...] = ()
    uses: tuple[Use, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.patterns or self.literals or self.uses)

    def merged(self, other: Reading) -> Reading:
        """Both readings, each list without repeats and capped."""
        return Reading(_capped(self.patterns + other.patterns, MAX_PATTERNS),
                       _capped(self.literals + other.literals, MAX_LITERALS), _capped(self.uses + other.uses, MAX_USES))


def _capped(items: tuple, most: int) -> tuple:
    return tuple(dict.fromkeys(items))[:most]


def _const(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> object:
    """The constant ``node`` spells (folding ``+`` and ``*`` of constants, f-strings whose every part is one,
    module-level names and names of names); None otherwise.  At most :data:`MAX_FOLD_DEPTH` hops deep (a name
    bound to itself, or a chain of them, stops there)."""
    if depth > MAX_FOLD_DEPTH:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return _const(names[node.id], names, depth + 1)
    if isinstance(node, ast.JoinedStr):  # rf"Answer:\s*{_NUM}%": each part a constant, no conversion or spec
        parts = [v.value if isinstance(v, ast.Constant) else _const(v.value, names, depth + 1)
                 if isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None else None
                 for v in node.values]
        return "".join(map(str, parts)) if all(isinstance(p, str | int) for p in parts) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
        left, right = _const(node.left, names, depth + 1), _const(node.right, names, depth + 1)
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(left, str) and isinstance(right, int) and 0 <= right <= 8:
            return left * right
    return None


def _flags(node: ast.AST | None) -> int:
    """The flags a call's flags argument spells (``re.I | re.M``); 0 for anything else."""
    if node is None:
        return 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return _FLAGS.get(name, 0)


def _call_name(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id \
        if isinstance(node.func, ast.Name) else ""


def _pattern_of(node: ast.Call, names: dict[str, ast.AST]) -> Pattern | None:
    """The pattern a call of one of ``re``'s functions applies (a module-level compiled one included)."""
    if _call_name(node) not in _RE_CALLS or not node.args:
        return None
    if _call_name(node) == "split" and len(node.args) < 2:  # str.split(sep): a literal, not re.split(p, text)
        return None
    text = _const(node.args[0], names)
    if not isinstance(text, str) or not text or len(text) > MAX_PATTERN_CHARS:
        return None
    flag_arg = next((k.value for k in node.keywords if k.arg == "flags"), None)
    if flag_arg is None and len(node.args) > 1:
        flag_arg = node.args[-1] if _call_name(node) == "compile" or len(node.args) > 2 else None
    return Pattern(text, _flags(flag_arg))


def _skipped(tree: ast.AST) -> set[int]:
    """Ids of string nodes that are no feature: docstrings, subscripts, dict keys, ``get``'s and ``pop``'s keys."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            out.add(id(node.body[0].value))
        elif isinstance(node, ast.Subscript):
            out.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            out.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Call) and _call_name(node) in {"get", "pop", "setdefault", "getattr", "hasattr"}:
            out.update(id(a) for a in node.args[:2])
        elif isinstance(node, ast.keyword) or isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in ast.walk(node) if isinstance(v, ast.Constant))
    return out


def _module_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound once to an expression (``_AUDITS = (...)``, ``ANSWER = re.compile(...)``)."""
    names: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = stmt.value
    return names


class _Budget:
    """Node visits left to one source's reading, and what each module-level name reads (read once)."""

    def __init__(self) -> None:
        self.left = MAX_VISITS
        self.names: dict[str, tuple[list, list]] = {}


def _read_scope(scope: ast.AST, names: dict[str, ast.AST], skipped: set[int],
                budget: _Budget) -> tuple[list, list, list[int]]:
    """The patterns, literals and counts of ``scope`` (names bound at module level read where they are used); a
    scope read past the budget's visits is read in part."""
    patterns: list[Pattern] = []
    literals: list[str] = []
    counts: list[int] = []
    seen_names: set[str] = set()
    for node in ast.walk(scope):
        budget.left -= 1
        if budget.left < 0:
            break
        if isinstance(node, ast.Name) and node.id in names and node.id not in seen_names:
            seen_names.add(node.id)  # a module constant used here: read it as if written here (once a source)
            if node.id not in budget.names:
                budget.names[node.id] = _read_scope(names[node.id], {}, skipped, budget)[:2]
            sub_patterns, sub_literals = budget.names[node.id]
            patterns += sub_patterns[:MAX_PATTERNS]
            literals += sub_literals[:MAX_LITERALS]
        elif isinstance(node, ast.Call):
            found = _pattern_of(node, names)
            if found is not None:
                patterns.append(found)
                skipped = skipped | {id(node.args[0])}
            elif _call_name(node) in _TEXT_METHODS:
                literals += [v for a in node.args if isinstance(v := _const(a, names), str)]
        elif isinstance(node, ast.Compare):  # a count spelled or held in a module-level name (``> _LIMIT``)
            counts += [v for c in (node.left, *node.comparators) if isinstance(c, ast.Constant | ast.Name)
                       and type(v := _const(c, names)) is int and 2 <= v <= MAX_COUNT]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
            value = _const(node, names)
            if isinstance(value, str):
                literals.append(value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            literals.append(node.value)
        elif isinstance(node, ast.JoinedStr) and id(node) not in skipped:  # f"{mark}{n}": folded, else its parts
            value = _const(node, names)
            literals += [value] if isinstance(value, str) else [v.value for v in node.values if isinstance(
                v, ast.Constant) and isinstance(v.value, str) and len(v.value.strip()) >= 2]
    literals = [t for t in literals if 0 < len(t) <= MAX_LITERAL_CHARS and t not in {p.text for p in patterns}]
    return patterns, literals, counts


def read_source(text: str) -> Reading:
    """What one Python source reads of a response; an empty reading where it does not parse, a partial one where
    it would take more than :data:`MAX_VISITS` node visits."""
    try:
        tree = ast.parse(text[:MAX_SOURCE_CHARS])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Reading()
    names, skipped, budget = _module_names(tree), _skipped(tree), _Budget()
    patterns, literals, _ = _read_scope(tree, names, skipped, budget)
    own: dict[int, tuple[list, list, list[int]]] = {}
    for node in ast.walk(tree):
        if budget.left < 0:
            break
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            own[id(node)] = _read_scope(node, names, skipped, budget)
    helpers = {f.name: own[id(f)] for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
               and id(f) in own}
    uses = []
    for node in ast.walk(tree):
        if id(node) not in own:  # not read within the budget
            continue
        f_patterns, f_literals, counts = (list(part) for part in own[id(node)])
        for callee in _callees(node, helpers, budget):  # a helper's features are the caller's too, one call deep
            f_patterns, f_literals, counts = (f_patterns + helpers[callee][0], f_literals + helpers[callee][1],
                                              counts + helpers[callee][2])
        f_patterns, f_literals = _capped(tuple(f_patterns), 4), _capped(tuple(f_literals), 4)
        uses += [Use(c, f_patterns, f_literals) for c in dict.fromkeys(counts)]
        if len(f_patterns) + len(f_literals) >= 2:  # features one function reads together: worn together
            uses.append(Use(1, f_patterns, f_literals))
    return Reading(_capped(tuple(patterns), MAX_PATTERNS), _capped(tuple(literals), MAX_LITERALS),
                   _capped(tuple(uses), MAX_USES))


def _callees(function: ast.AST, helpers: dict[str, tuple], budget: _Budget) -> list[str]:
    """The module-level functions ``function`` calls by name (itself left out), in call order, each once."""
    called: list[str] = []
    for node in ast.walk(function) if budget.left >= 0 else ():
        budget.left -= 1
        if budget.left < 0:
            break
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers \
                and node.func.id != getattr(function, "name", None) and node.func.id not in called:
            called.append(node.func.id)
    return called


def read_tree(root: Path) -> Reading:
    """What every ``.py`` file under ``root`` reads (path order, :data:`MAX_SOURCE_CHARS` in all)."""
    reading, left = Reading(), MAX_SOURCE_CHARS
    for path in sorted(p for p in Path(root).rglob("*.py") if p.is_file() and not p.is_symlink()):
        if left <= 0:
            break
        try:
            text = path.read_text(errors="replace")[:left]
        except OSError:
            continue
        left -= len(text)
        reading = reading.merged(read_source(text))
    return reading


def read_commit(repo: HarnessRepo, commit: str) -> Reading:
    """What the harness at ``commit`` of ``repo`` reads, from its exported files."""
    with tempfile.TemporaryDirectory(prefix="reward-reading-") as tmp:
        return read_tree(repo.export(commit, Path(tmp) / "harness"))


def read_seed(domain_name: str) -> Reading:
    """What the seed harness of ``domain_name`` reads (empty for a domain without a seed)."""
    root = SEEDS_DIR / domain_name
    return read_tree(root) if root.is_dir() else Reading()

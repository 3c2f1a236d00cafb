"""Mutation twins: copies of the deciding tests, laid into their own files at grading time, that betray a flip.

    twins = make_twins(repo, deciding=task.fail_to_pass, others=task.pass_to_pass)
    for rel, text in twins.files.items(): (repo / rel).write_text(text)
    twins.nodes                                            # run them with the rest
    twins.tampering(outcomes)                              # [] unless a twin betrays a flip

A must-fail twin contradicts its test (another literal of the file as the expectation, or one top-level
expectation turned to its opposite), so no program passes both; a twin that passed beside its passing test
means something turned failures into passes.  Twins live in the real test's file and scope, are named in the
shape of the file's own test names, and sit after a random sibling, all drawn from a secret seed per grade.  Where
the copies differ by a value (a literal, an exception, a type, a message), every copy reads it through a name drawn
per grade, which the runners bind in the test module before its tests run (``Twins.bindings``, sent with their
arguments; ``execution.twin_bindings``): the file on disk holds no value they read.
"""

from __future__ import annotations

import ast
import random
import re
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from execution.twin_bindings import bindable, bound_name, shaped
from execution.twin_names import draw_name, draw_names
from execution.twin_old import OldFile
from execution.twin_rank import balanced as _balanced
from execution.twin_sources import class_names, expected_literals, locate
from execution.twin_spelling import respell
from execution.twin_edits import (Contradiction, Edit, claims_negatively, contradictions, nudges, parsed, source_lines,
                                  spelled_like)


PER_TEST = 2
"""Must-fail copies per deciding test with a literal to swap (one where a claim is contradicted instead).  A blind flip
of one copy resolves 1 grade in 3 (1 in 2 for a contradiction): ``tests/test_d4_blind.py``.  Seven (1 in 8) was tried
and reverted (session 39, d4): the twin readings' draws cost ~6x as much and 8 readings won."""


@dataclass(frozen=True)
class Twin:
    """A copy of a real test laid into its file at grading time."""

    node: str
    of: str
    """The node id of the real test it copies."""
    must: str
    """"fail": its expectation was changed, so it can never pass; "match": unchanged, its outcome equals ``of``'s."""


@dataclass(frozen=True)
class Twins:
    files: dict[str, str]
    """Repo-relative test file -> its text with the twins laid in."""
    twins: tuple[Twin, ...]
    renamed: dict[str, str] = field(default_factory=dict)
    """Deciding node id -> its node id in the laid-in file: the real test is given a drawn name too, so that no
    name (one the policy saw in the old tests, or the file's own naming habits) tells it from its twins."""
    bindings: dict[str, dict[str, str]] = field(default_factory=dict)
    """Repo-relative test file -> {name: value source}: the names every copy of a group reads its differing value
    through (``execution.twin_bindings``).  Never written in the file: the runners bind them in the test module's
    namespace before its tests run (``inbox/grader_sight.bind``)."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(t.node for t in self.twins)

    def run_id(self, node: str) -> str:
        """The node id under which ``node`` runs in the laid-in files."""
        return self.renamed.get(node, node)

    def tampering(self, outcomes: dict[str, str], where: str = "") -> list[str]:
        """Twins whose outcome betrays a flip: a changed expectation that passed beside its test, a copy that differs.

        A must-fail twin contradicts its test (another literal, the opposite assertion), so no program passes
        both: a twin that passed while its test failed is an honest wrong answer that met the changed
        expectation (``unresolved``), never evidence; both passing is."""
        found = []
        for twin in self.twins:
            got, real = outcomes.get(twin.node), outcomes.get(self.run_id(twin.of))
            if twin.must == "fail" and got == "passed" and real == "passed":
                found.append(f"twin{where}: a copy of {twin.of} with a changed expectation reported 'passed'")
            elif twin.must == "match" and {got, real} == {"passed", "failed"}:
                found.append(f"twin{where}: {twin.of} {real} but its unchanged copy {got}")
        return found


def make_twins(repo: Path, deciding: list[str], others: list[str], *, per_test: int = PER_TEST, limit: int = 8,
               rng: random.Random | None = None, old: Path | None = None) -> Twins:
    """Twins for the ``deciding`` tests (node ids under ``repo``), drawn from a secret seed unless ``rng`` is given.

    ``old`` is the repo as the policy saw it (the test files before the hidden tests were written): a twin then
    changes a statement of its test that the old file does not hold, where the test has one (``execution.twin_old``).

    A deciding test whose body asserts an equality with a literal at its top level (``assert f(x) == 3``,
    ``self.assertEqual(f(x), 'a')``: a statement every passing run reaches) gets ``per_test`` copies, each
    with that literal replaced by another literal of the same type from the same file.  Any other deciding
    test gets one copy with one top-level expectation contradicted (``==`` made ``!=``, ``assertEqual`` made
    ``assertNotEqual``, ``assert x`` made ``assert not x``, the body of ``with pytest.raises(...)`` run bare):
    no program passes both the test and that copy.  Each file with a deciding test also gets one unchanged
    copy of a test from ``others``.  Twins are named in the shape of the scope's own test names (one word of
    one of them changed for another of their words) and placed after a random sibling, so neither name,
    place nor source tells a twin from the test it copies; a flip that does not know which is which flips one.
    Where every twin of a test changes the same one value (a literal, a ``raises`` exception or message, an
    ``isinstance`` type), each copy, the real one too, reads it through its own drawn name instead, which only the
    runners bind (``Twins.bindings``).
    """
    rng = rng or random.Random(secrets.randbits(64))
    edits: dict[str, list[tuple[int, str]]] = {}
    texts: dict[str, str] = {}
    twins: list[Twin] = []
    taken: set[str] = set()
    renames: dict[tuple[str, int], tuple[str, str]] = {}  # (path, def line) -> (old name, new name)
    renamed: dict[str, str] = {}
    mirrors: dict[str, list[Edit]] = {}  # path -> whole-line edits of real tests written in their mirrored form
    laid: dict[tuple[str, int], list[str]] = {}  # (path, def line) -> its twins' names (an inherited test's, once)
    groups: dict[str, list[tuple[str, list[str], list[str]]]] = {}  # path -> (real name, twin names, body lines)
    olds: dict[str, OldFile] = {}
    bindings: dict[str, dict[str, str]] = {}  # path -> name -> the value its copy reads there
    bound_names: set[str] = set()
    for node in deciding:  # a name a deciding class defines itself would hide the twin it inherits under that name,
        path, *scopes = node.split("::")  # and a twin named like a test the class inherits would hide that test
        if len(scopes) == 2 and path.endswith(".py"):
            taken |= class_names(repo, path, scopes[0], texts)
    for node in deciding:
        found = locate(repo, node, texts)
        if found is None:
            continue
        path, scope, func = found
        if (path, func.lineno) in laid:  # another parameter, or inherited by another class: its copies are shared
            twins += [Twin(_node(node, name), node, "fail") for name in laid[path, func.lineno]]
            if (path, func.lineno) in renames and path == node.split("::")[0]:
                renamed[node] = _node(node, renames[path, func.lineno][1])
            continue
        if sum(map(len, laid.values())) >= limit:
            break
        source = texts[path]
        if old is not None and path not in olds:
            olds[path] = OldFile((old / path).read_text() if (old / path).is_file() else "")
        changes, mirror = _changes(source, func, per_test, rng, olds.get(path))
        # the copies differ by a value, an operator or a method: every copy reads it through a name (mirror unused)
        spot = (bindable(source, func, changes) if mirror is None else None) or shaped(source, func, changes)
        if spot is None and mirror is not None:
            mirrors.setdefault(path, []).append(mirror)
        elif spot is not None:
            names = [bound_name(rng, bound_names, source) for _ in range(len(changes) + 1)]
            bindings.setdefault(path, {}).update(zip(names, spot.values))
            mirrors.setdefault(path, []).append(spot.edit(names[0])[0])  # one span of one line, like a mirror
            changes = [spot.edit(name) for name in names[1:]]
        real_rank = rng.randrange(len(changes) + 1)  # how many of its twins come before the real test
        real_name = func.name
        # Renamed when named nowhere but its def, and not inherited (a rename would rename every class's copy,
        # the PASS_TO_PASS ones too)
        if changes and path == node.split("::")[0] and len(re.findall(rf"\b{re.escape(func.name)}\b", source)) == 1:
            real_name = renames.setdefault((path, func.lineno), (func.name, draw_name(scope, rng, taken)))[1]
            renamed[node] = _node(node, real_name)
        body = "".join(source_lines(source)[func.lineno:func.end_lineno])
        names = draw_names(scope, rng, taken, body, real_name, len(changes))
        for index, change in enumerate(changes):
            twin = _copy(source, scope, func, names[index], rng, change, before=index < real_rank)
            edits.setdefault(path, []).append(twin[0])
            twins.append(Twin(_node(node, twin[1]), node, "fail"))
            laid.setdefault((path, func.lineno), []).append(twin[1])
        if changes:  # the real copy is respelled too, and measured against the test as it was written
            groups.setdefault(path, []).append((real_name, names, source_lines(source)[func.lineno:func.end_lineno]))
    for path in list(edits):
        candidates = [n for n in others if n.split("::")[0] == path]
        rng.shuffle(candidates)
        for node in candidates:
            found = locate(repo, node, texts)
            if found is not None and found[0] == path:  # defined in this file (an inherited one lives elsewhere)
                _, scope, func = found
                twin = _copy(texts[path], scope, func, draw_name(scope, rng, taken), rng, [],
                             before=rng.random() < 0.5)
                edits[path].append(twin[0])
                twins.append(Twin(_node(node, twin[1]), node, "match"))
                break
    files = {}
    for path, inserts in edits.items():
        lines = source_lines(texts[path])
        for edit in mirrors.get(path, []):  # one line for one line: the twins' insertion points stay where they were
            row = lines[edit.lineno - 1]
            ending = row[len(row.rstrip("\r\n")):]
            if edit.col or edit.end_col < len(row.rstrip("\r\n").encode()):  # a span of the line, not all of it
                body = row.rstrip("\r\n").encode()
                lines[edit.lineno - 1] = (body[:edit.col] + edit.text.encode() + body[edit.end_col:]).decode() + ending
            else:
                lines[edit.lineno - 1] = edit.text + ending
        for (where, line), (old, new) in renames.items():
            if where == path:
                lines[line - 1] = re.sub(rf"\bdef\s+{re.escape(old)}\b", f"def {new}", lines[line - 1], count=1)
        for after, text in sorted(inserts, key=lambda item: -item[0]):
            lines[after:after] = [text]
        files[path] = respell("".join(lines), groups.get(path, []), rng)  # the names bound by the runners only
    return Twins(files, tuple(twins), renamed, bindings)


def _changes(source: str, func: ast.FunctionDef, per_test: int, rng: random.Random,
             old: OldFile | None = None) -> tuple[list[list[Edit]], Edit | None]:
    """The edits of each must-fail twin of ``func`` (``per_test`` literal swaps, else one contradiction, else none),
    and the whole-line edit that writes the real test in its mirrored form (or None: as it is).

    What a twin changes is drawn to look as common in the file as what the real test has there: its line as often
    seen elsewhere in the file as the real one, its literal as often as the real literal, so neither the rarer
    literal nor the line written once tells the twin (a real test is often pasted from another).  Given the ``old``
    test file, a statement it holds is changed only where the test has no other, and the changed line's nearness
    to the old file's statements is ranked too, on a statement whose twins can fall either side of the real one."""
    module = parsed(source)
    lines = source_lines(source)
    rows = [row.rstrip("\r\n").encode() for row in lines]
    elsewhere = Counter(line.strip() for at, line in enumerate(lines, 1) if not func.lineno <= at <= func.end_lineno)

    def changed(edits: list[Edit]) -> str:
        """The first line the edits touch, as they leave it, stripped."""
        edit = edits[0]
        if edit.lineno != edit.end_lineno:
            return edit.text.splitlines()[0].strip() if edit.text.strip() else ""
        row = rows[edit.lineno - 1]
        return (row[:edit.col] + edit.text.encode() + row[edit.end_col:]).decode().strip()

    def near(line: str) -> tuple[float, ...]:
        """How like a statement of the old file the line is (nothing where no old file was given)."""
        return (old.nearness(line),) if old is not None and line else ()

    outside = Counter(repr(n.value) for n in ast.walk(module) if isinstance(n, ast.Constant))
    outside.subtract(repr(n.value) for n in ast.walk(func) if isinstance(n, ast.Constant))
    literals = list(expected_literals(func, module))
    if old is not None:  # a statement the old file holds names the real copy, whatever its twins say
        literals = [c for c in literals if not old.holds(lines[c.lineno - 1])] or literals
    # those whose value is not the file's commonest of its type: twins keep the claim's shape (``==`` against
    # another value), so only another literal as common as the real one keeps the commonest from naming it
    literals = [c for c in literals if any(type(n.value) is type(c.value) and n.value != c.value
                                           and outside[repr(n.value)] >= outside[repr(c.value)]
                                           for n in ast.walk(module) if isinstance(n, ast.Constant))] or literals[:1]
    options = []
    for literal in literals[:1] if old is None else rng.sample(literals, min(len(literals), CANDIDATES)):
        found = _literal_twins(literal, module, rows, per_test, rng, changed, near, elsewhere, outside,
                               sample=old is not None)
        options.append(found)
        if old is None or _straddles(found):
            break
    if options:
        # the statement whose twins' nearness to the old file can rank the real one's anywhere: a real statement
        # pasted from an old one with one token changed is nearer to it than any twin that changes another token
        found = next((f for f in options if _straddles(f)), options[0])
        return _balanced(found, per_test, rng), None
    options = contradictions(source, func, rng, old.names if old is not None else frozenset())
    if not options:
        return [], None
    options = [o for o in options if not o.tell] or options
    if old is not None:
        options = [o for o in options if not old.holds(lines[o.edits[0].lineno - 1])] or options
    # The twin claims positively as often as the file's own assertions do, so cancelling negations and taking the
    # copy that claims positively finds the real test no more often than a guess
    claims = [claims_negatively(st) for st in ast.walk(module) if isinstance(st, ast.Assert) or isinstance(
        st, ast.Expr) and isinstance(st.value, ast.Call) and getattr(st.value.func, "attr", "").startswith("assert")]
    rate = claims.count(False) / len(claims) if claims else 0.5
    positive = rng.random() < rate
    options = [o for o in options if o.positive == positive] or options
    # A positive twin that negates a negative real claim leaves the real copy the more negative one; drawn as often
    # as a negative twin of a positive claim is, so taking the most negative copy finds the real test by chance only
    flips = [o for o in options if o.negates and o.positive]
    rest = [o for o in options if not (o.negates and o.positive)]
    if flips and rest:
        options = flips if rng.random() < min(1.0, (1 - rate) / max(rate, 1e-9)) else rest
    # Half the time the real test is written as the negation of its twin (``assert not (a != b)`` beside the twin's
    # ``assert a != b``): the same outcome for every program, but which copy carries the extra negation tells nothing.
    mirrored = rng.random() < 0.5

    def real(o: Contradiction) -> tuple:
        line = changed([o.mirror]) if mirrored and o.mirror is not None else rows[o.edits[0].lineno - 1].decode()
        return (elsewhere[line.strip()], *near(line))
    lined = [(changed(o.edits), o) for o in options]
    twin = _balanced([((elsewhere[line], *near(line)), real(o), o) for line, o in lined], 1, rng)[0]
    return [twin.edits], twin.mirror if mirrored else None


CANDIDATES = 6
"""Statements tried for one test's literal twins: enough to find one whose twins straddle it, few enough to be quick."""
POOL = 24
"""Literals measured per statement against the old file."""


def _literal_twins(literal: ast.Constant, module: ast.Module, rows: list[bytes], per_test: int, rng: random.Random,
                   changed, near, elsewhere: Counter, outside: Counter, *, sample: bool) -> list:
    """``_balanced``'s input for twins of ``literal``: each other literal of its type in the file (as written there)
    and ``per_test`` nudges of it (as the real one is written), with its counts beside the real one's."""
    def written(n: ast.Constant) -> str:
        return rows[n.lineno - 1][n.col_offset:n.end_col_offset].decode()
    pool = {n.value: written(n) for n in ast.walk(module)
            if isinstance(n, ast.Constant) and type(n.value) is type(literal.value) and n.value != literal.value
            and n.lineno == n.end_lineno and len(repr(n.value)) <= 80}  # the file's other expectations, as written
    nudged = nudges(literal.value, per_test, rng)
    for value in nudged:  # written as the real literal is (hex, r'', 1_000)
        pool.setdefault(value, spelled_like(value, written(literal)))
    items = [(value, text) for value, text in pool.items() if text]
    if sample and len(items) > POOL:  # the nudges always: only they are as rare and as long as the real literal
        kept = [item for item in items if item[0] in nudged]
        items = kept + rng.sample([item for item in items if item[0] not in nudged], POOL - len(kept))

    def swap(text: str) -> list[Edit]:
        return [Edit(literal.lineno, literal.col_offset, literal.end_lineno, literal.end_col_offset, text)]

    def counts(text: str, value) -> tuple:
        line = changed(swap(text))
        return (elsewhere[line], outside[repr(value)], *near(line))
    # The twin keeps the real claim's shape (an equality against another expected value): a twin claiming the
    # same literal otherwise (``<``, ``assertGreater``) left the real copy the one that said ``==``
    real = counts(written(literal), literal.value)
    return [(counts(text, value), real, swap(text)) for value, text in items]


def _straddles(found: list) -> bool:
    """Some twin of ``found`` is nearer the old file than the real copy, and some further (the last count)."""
    return any(f[0][-1] > f[1][-1] for f in found) and any(f[0][-1] < f[1][-1] for f in found)


def _node(node: str, name: str) -> str:
    head, _, last = node.rpartition("::")
    param = last[last.index("["):] if "[" in last else ""
    return f"{head}::{name}{param}"


def _copy(source: str, scope: ast.AST, func: ast.FunctionDef, name: str, rng: random.Random,
          edits: list[Edit], *, before: bool) -> tuple[tuple[int, str], str]:
    """((line after which to insert, text), name): ``func`` renamed, ``edits`` applied, at a random place ``before``
    or after ``func`` in its scope (where the real test sits in the file tells nothing: it is drawn too)."""
    lines = source_lines(source)
    start = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    while start > 1 and lines[start - 2].strip().startswith("#"):
        start -= 1  # the comment above the test is copied with it
    body = lines[start - 1:func.end_lineno]
    for edit in sorted(edits, key=lambda e: (e.lineno, e.col), reverse=True):
        first, last = body[edit.lineno - start].encode(), body[edit.end_lineno - start].encode()
        body[edit.lineno - start:edit.end_lineno - start + 1] = [
            (first[:edit.col] + edit.text.encode() + last[edit.end_col:]).decode()]
    row = func.lineno - start
    body[row] = re.sub(rf"\bdef\s+{re.escape(func.name)}\b", f"def {name}", body[row], count=1)
    if not body[-1].endswith("\n"):
        body[-1] += "\n"
    gap = 0  # the blank lines the file puts before the real test: the twin is spaced the same way
    while start - 2 - gap >= 0 and not lines[start - 2 - gap].strip():
        gap += 1
    siblings = [n for n in scope.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    first = siblings[0]
    head = min([first.lineno, *(d.lineno for d in first.decorator_list)])
    while head > 1 and lines[head - 2].strip().startswith("#"):
        head -= 1
    points = [head - 1 - _blank_above(lines, head), *(n.end_lineno for n in siblings)]
    side = [p for p in points if (p < start if before else p >= func.end_lineno)] or [func.end_lineno]
    return (rng.choice(side), "\n" * gap + "".join(body)), name


def _blank_above(lines: list[str], line: int) -> int:
    count = 0
    while line - 2 - count >= 0 and not lines[line - 2 - count].strip():
        count += 1
    return count

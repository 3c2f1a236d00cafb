"""The twin draws every statistical twin test reads, drawn once per test session (issue 46, item 3).

    def test_x(twin_cases): assert wins_per_test(reading, twin_cases) == []

For every deciding test function of every shipped task, ``SEEDS`` draws of ``make_twins`` (one per secret seed),
each as a reader in the graded process sees it: the copies in file order, which of them is real, the test file the
policy was shown and the laid-in text.  The reading files used to draw these each for themselves (seven times the
same draws per session); they now share one list, and the parsed trees of its texts (readings never change a tree).

``cases()`` is the file as a reader that knows every bound value sees it (each drawn name replaced by its value:
the strongest reader, not what is shipped); ``bare_cases()`` the same draws as ``make_twins`` writes them to disk,
the shipped state: the runners bind the names (``execution.twin_bindings``), the file holds none of their values;
``laid_cases()`` the files as helper d laid them before (the binding lines at their end), kept for the readings
written against that.
"""

from __future__ import annotations

import ast
import random
import re
from functools import lru_cache

import pytest

from execution.twin_bindings import block
from execution.twins import make_twins
from swe_env.spec import SPECS_DIR, load_spec
from swe_env.tasks import agent_repo, task_from, task_repo

SEEDS = 40
"""Draws per deciding test function (20 before, counted once per parameter and per inheriting class: the same
draw four or five times over, which made a fair distinguisher's score swing by tens)."""

Case = tuple[list[str], list[tuple[int, str, str]], int, str, str]
"""(copy names in file order, (first line, name, line above) of each, index of the real one, old test file text,
laid-in test file text)."""


@lru_cache(maxsize=None)
def parsed(text: str) -> ast.Module:
    """The laid-in file's tree, parsed once per session: a reading walks it, never changes it."""
    return ast.parse(text)


def bodies(order: list[str], text: str) -> list[ast.FunctionDef]:
    """The copies' functions, in ``order``."""
    found = {f.name: f for f in ast.walk(parsed(text)) if isinstance(f, ast.FunctionDef) and f.name in order}
    return [found[name] for name in order]


def _cases(bare: list[str]) -> list[Case]:
    out = []
    done = set()  # a test function is one case per seed: its parameters and the classes inheriting it share the draw
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        spec = load_spec(path)
        task = task_from(spec, ())
        repo, old = task_repo(task), agent_repo(task)
        for node in spec.fail_to_pass:
            for seed in range(SEEDS):
                twins = make_twins(repo, [node], [], rng=random.Random(seed), old=old)
                mine = [t for t in twins.twins if t.of == node and t.must == "fail"]
                if not mine:
                    continue
                first = mine[0].node.split("::")[-1].split("[")[0]  # an inherited test's copies live in its mixin
                file = next(f for f, t in twins.files.items() if re.search(rf"def {first}\b", t))
                text = twins.files[file]
                real = twins.run_id(node)
                names = {n.split("::")[-1].split("[")[0] for n in [real, *(t.node for t in mine)]}
                lines = text.splitlines()
                copies = sorted((f.lineno, f.name, lines[min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 2])
                                for f in ast.walk(parsed(text))
                                if isinstance(f, ast.FunctionDef) and f.name in names)
                if seed == 0:  # keyed by the test's own name: two tests of a file may draw one name at a seed
                    if (spec.id, file, node.split("::")[-1].split("[")[0]) in done:
                        break
                    done.add((spec.id, file, node.split("::")[-1].split("[")[0]))
                old_text = (old / file).read_text() if (old / file).is_file() else ""
                order = [name for _, name, _ in copies]
                out.append((order, copies, order.index(real.split("::")[-1].split("[")[0]), old_text,
                            resolved(text, bound := twins.bindings.get(file, {}))))
                bare.append(text)
                _LAID.append(text + block(bound) if bound else text)
    return out


def cut(text: str, bound: dict[str, str]) -> str:
    """``text`` without binding lines at its end (a laid view's; a file as written has none)."""
    if not bound or not text.endswith(block(bound)):
        return text
    return text[:len(text) - len(block(bound))]


def resolved(text: str, bound: dict[str, str]) -> str:
    """``text`` as a reader of the binding lines sees it: each bound name replaced by the value its line gives it,
    the binding lines gone, so every reading of the values reads them as before."""
    text = unshaped(cut(text, bound), bound)
    for name, value in bound.items():
        text = re.sub(rf"\b{re.escape(name)}\b", lambda _: value, text)
    return text


SIGNS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "is_": "is", "is_not": "is not"}


def unshaped(text: str, bound: dict[str, str]) -> str:
    """``text`` with each claim written through a bound operator or method (``execution.twin_bindings.shaped``)
    written as its copy means it: ``_k(a, b)`` with ``_k`` = ``operator.lt`` as ``a < b``, ``getattr(self, _k)``
    with ``_k`` = ``'assertEqual'`` as ``self.assertEqual``: the claim a reader who knows the values sees."""
    import ast

    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(parsed(text)):
        if not isinstance(node, ast.Call) or node.lineno != node.end_lineno:
            continue
        row = lines[node.lineno - 1].encode()

        def seg(n: ast.AST) -> str:
            return row[n.col_offset:n.end_col_offset].decode()
        func = node.func
        if isinstance(func, ast.Name) and bound.get(func.id, "").startswith("operator."):
            kind = bound[func.id].split(".", 1)[1]
            args = [seg(a) for a in node.args]
            claim = f"{args[0]} {SIGNS[kind]} {args[1]}" if kind in SIGNS and len(args) == 2 else \
                f"not ({args[0]})" if kind == "not_" else f"({args[0]})"
            edits.append((node.lineno, node.col_offset, node.end_col_offset, claim))
        elif isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "getattr" \
                and len(func.args) == 2 and isinstance(func.args[1], ast.Name) and func.args[1].id in bound:
            method = ast.literal_eval(bound[func.args[1].id])
            edits.append((func.lineno, func.col_offset, func.end_col_offset, f"{seg(func.args[0])}.{method}"))
    for lineno, start, end, claim in sorted(edits, key=lambda e: (e[0], -e[1])):
        row = lines[lineno - 1].encode()
        lines[lineno - 1] = (row[:start] + claim.encode() + row[end:]).decode()
    return "".join(lines)


_CASES: list[Case] | None = None
_BARE: list[str] = []
_LAID: list[str] = []


def cases() -> list[Case]:
    """Every draw, computed on the first call of the session."""
    global _CASES
    if _CASES is None:
        _CASES = _cases(_BARE)
    return _CASES


def laid_cases() -> list[Case]:
    """The same draws with binding lines at each text's end (as d laid them before the runners bound the names)."""
    return [(*case[:4], text) for case, text in zip(cases(), _LAID)]


def bare_cases() -> list[Case]:
    """The same draws as written to disk: the names the copies read stay unresolved (the shipped state)."""
    return [(*case[:4], text) for case, text in zip(cases(), _BARE)]


@pytest.fixture(scope="session")
def twin_cases() -> list[Case]:
    return cases()


def wins_per_test(distinguisher, found: list[Case] | None = None) -> list[tuple[str, int]]:
    """The tests on whose SEEDS draws ``distinguisher`` names the real copy more often than 1.5 x a guess + 4
    (a fair guess goes over with a chance of about 1e-6 at 1 in 2, 6e-4 at 1 in 3), with its hits."""
    found = cases() if found is None else found
    assert found and len(found) % SEEDS == 0
    worst = []
    for start in range(0, len(found), SEEDS):
        group = found[start:start + SEEDS]
        hits = sum(distinguisher(order, copies, old, text) == real for order, copies, real, old, text in group)
        if hits > sum(1 / len(order) for order, *_ in group) * 1.5 + 4:
            worst.append((group[0][0][group[0][2]], hits))
    return worst

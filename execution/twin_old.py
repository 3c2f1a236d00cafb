"""The test file the policy saw, as a reader of the laid-in file would consult it to find the real copy.

    old = OldFile(text)              # the test file before the hidden tests were written ("" where there was none)
    old.holds(line)                  # its statement, or its plain spelling, stands in the old file
    old.nearness(line)               # 0..1: how like its likest statement of the old file its syntax tree is
    old.names                        # the plain names it reads (a twin's exception may be one of them)

A hidden test is the old file edited, so a statement of the real test is often one the old file holds, or one a
character away from one it holds; a twin's changed statement never is.  ``execution.twins`` therefore changes a
statement the old file does not hold, and draws its twins so that the real copy's nearness ranks anywhere among its
copies'.  Lines are read as a reader would: stripped and parsed alone, operands of a symmetric claim in one order
(the respelling swaps them), parentheses, quotes and literal spellings gone (the parser drops them).
"""

from __future__ import annotations

import ast
import difflib
import re
from functools import lru_cache

SYMMETRIC_OPS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
SYMMETRIC_METHODS = frozenset({"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals", "assertIs",
                               "assertIsNot"})


def canonical(line: str) -> str | None:
    """The syntax tree of a one-line statement (or a block's head), the operands of its symmetric claims sorted;
    None where the line does not parse alone."""
    code = line.strip()
    try:
        stmt = ast.parse(code + ("\n pass" if code.endswith(":") else "")).body[0]
    except (SyntaxError, IndexError, ValueError):
        return None
    for node in ast.walk(stmt):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], SYMMETRIC_OPS):
            pair = sorted([node.left, node.comparators[0]], key=ast.dump)
            node.left, node.comparators = pair[0], [pair[1]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in SYMMETRIC_METHODS and len(node.args) >= 2:
            node.args[:2] = sorted(node.args[:2], key=ast.dump)
    return ast.dump(stmt)


def plain(line: str) -> str:
    """``line`` without spaces, parentheses and quote style."""
    return re.sub(r"[()\s]", "", line).replace('"', "'")


class OldFile:
    """The statements of one old test file (see the module)."""

    def __init__(self, text: str):
        rows = [row for row in text.splitlines() if row.strip()]
        self.plains = frozenset(plain(row) for row in rows)
        self.trees = tuple(sorted({t for row in rows if (t := canonical(row)) is not None}))
        self._held = frozenset(self.trees)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        self.names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))

    def holds(self, line: str) -> bool:
        tree = canonical(line)
        return plain(line) in self.plains or tree is not None and tree in self._held

    def nearness(self, line: str) -> float:
        """difflib's ratio of the line's tree to the likest tree of a statement of the same kind in the old file."""
        tree = canonical(line)
        return _nearest(tree, self.trees) if tree is not None else 0.0


@lru_cache(maxsize=4096)
def _nearest(tree: str, trees: tuple[str, ...]) -> float:
    """(Drawing one grade's twins measures the same few trees many times.)"""
    matcher = difflib.SequenceMatcher(None, b=tree, autojunk=False)
    kind, best = tree[:tree.find("(")], 0.0
    for other in trees:
        if not other.startswith(kind):  # an assert is likest an assert
            continue
        matcher.set_seq1(other)
        if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
            best = max(best, matcher.ratio())
    return best

"""Twin names: drawn in the shape of a scope's own test names, so that no name tells a twin from the test it copies.

    name = draw_name(scope, rng, taken)                       # one of the scope's names with a word changed
    names = draw_names(scope, rng, taken, body, real, k)      # k of them, ranked about the real name's by its body

Read by ``execution.twins``; the ranking is ``execution.twin_rank``'s.
"""

from __future__ import annotations

import ast
import random

from execution.twin_rank import balanced


def name_in_body(name: str, body: str) -> int:
    """How many of ``name``'s words (longer than two letters) its test's body holds: a test is named for what it
    does, so a drawn name would read less like its body than the real one's."""
    rest = body.lower()
    return sum(1 for word in name.split("_")[1:] if len(word) > 2 and word.lower() in rest)


def draw_names(scope: ast.AST, rng: random.Random, taken: set[str], body: str, real: str, k: int) -> list[str]:
    """``k`` twin names drawn like ``draw_name``'s, taken from a larger draw so that how many of its words the body
    holds ranks the real name (``real``) anywhere among its copies with equal odds (``balanced``): ties first."""
    if k == 0:
        return []
    pool: dict[str, tuple[int]] = {}
    trial = set(taken)
    for _ in range(12 * k):
        try:
            name = draw_name(scope, rng, trial)
        except ValueError:
            break
        pool[name] = (name_in_body(name, body),)
    score = (name_in_body(real, body),)
    picked = balanced([(s, score, n) for n, s in pool.items()], k, rng)
    while len(picked) < k:  # a scope with hardly any names: plain draws
        picked.append(draw_name(scope, rng, trial))
    taken.update(picked)
    return picked


def draw_name(scope: ast.AST, rng: random.Random, taken: set[str]) -> str:
    """A new name in the shape of the scope's test names: one of them with a word changed for another of theirs."""
    names = {n.name for n in scope.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    shapes = sorted(n for n in names if n.startswith("test_") and len(n) > 5) or ["test_case_check"]
    words = sorted({w for n in shapes for w in n.split("_")[1:] if w})
    for attempt in range(200):
        parts = rng.choice(shapes).split("_")[1:]
        at = rng.randrange(len(parts))
        parts[at] = rng.choice(words)
        if attempt > 100:  # a file of one or two short names: grow one by a word of the file
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(words))
        name = "test_" + "_".join(p for p in parts if p)
        if name not in names and name not in taken and name != "test_":
            taken.add(name)
            return name
    raise ValueError("no fresh test name could be drawn")  # unreachable for any real test file

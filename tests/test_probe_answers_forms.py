"""The probe's wrong SWE patches and code programs carry no mark of construction, and SWE ones keep the bug.

Real shipped SWE tasks and code tasks, the real patch parser; no container (the SWE record is true by
construction: every edit keeps what the buggy program does, and ``tests/test_probe_swe_rewrites.py`` grades drawn
patches with the real grader to show it; since held-out set b the syntax tree changes too).
"""

from __future__ import annotations

import ast
import random
import re

from domains.code_tasks import tasks_by_id
from domains.swe import SweDomain
from harness_repo.contract import TaskSpec
from meta_agent.judge.audit_hedge import hedge
from meta_agent.judge.probe_answers import hard_coded
from meta_agent.judge.probe_answers_forms import reformatted, renamed, same_meaning, token_mutant
from meta_agent.judge.probe_answers_swe import wrong_patch
from swe_env.checked import load_task
from swe_env.patch_format import parse_response
from swe_env.tasks import buggy_sources


def per_file(patch: str) -> dict[str, str]:
    """A multi-file diff's part per file (from its ``--- a/`` line; ``diff --git`` and index lines left out)."""
    out: dict[str, list[str]] = {}
    path = None
    for line in patch.splitlines(keepends=True):
        if line.startswith(("diff --git ", "index ")):
            continue
        if line.startswith("--- a/"):
            path = line[6:].rstrip("\n")
        if path is not None:
            out.setdefault(path, []).append(line)
    return {p: "".join(lines) for p, lines in out.items()}


def _apply(source: str, patch: str) -> str:
    """``patch``'s single file applied to ``source`` (hunks in order, context checked)."""
    old, out, at = source.splitlines(keepends=True), [], 0
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        found = re.match(r"^@@ -(\d+)", lines[i])
        i += 1
        if not found:
            continue
        start = int(found.group(1)) - 1
        out += old[at:start]
        at = start
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][:1], lines[i][1:]
            if tag in (" ", "-"):
                assert old[at] == text, (old[at], text)
                at += 1
            if tag in (" ", "+"):
                out.append(text)
            i += 1
    return "".join(out + old[at:])


def _swe_tasks():
    tasks = SweDomain().tasks("train", [TaskSpec(name="all")], 60, seed=5)
    return list({t.task_id: t for t in tasks}.values())


def test_swe_wrong_patches_change_code_parse_and_keep_the_buggy_program():
    tasks = _swe_tasks()
    assert len(tasks) >= 3
    shapes = set()
    for task in tasks:
        sources = buggy_sources(load_task(str(task.ground_truth["task_id"])))
        for seed in range(6):
            patch = wrong_patch(str(task.ground_truth["gold_patch"]), sources, random.Random(seed))
            assert patch is not None, task.task_id
            assert parse_response(f"```diff\n{patch}```", sources).status == "ok", patch
            added = [ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
            code = [ln for ln in added if not ln.strip().startswith("#")]
            assert code, patch  # a change of code, not a comment alone
            path, part = next(iter(per_file(patch).items()))  # its first file (a patch may touch the gold's others)
            patched = _apply(sources[path], part)
            assert patched != sources[path]
            assert ast.dump(ast.parse(patched)) != ast.dump(ast.parse(sources[path])), patch  # code, not spelling
            shapes.add((len(code), len(added) - len(code)))
    assert len(shapes) >= 3, shapes  # how many lines, and whether a note joins them, is drawn per patch


def test_same_meaning_keeps_the_tree_and_changes_the_text():
    rng = random.Random(4)
    lines = ['    u = int(float("." + u) * 1000000)', "        elif type == 'x':", "    return a+b",
             "    except (ValueError, KeyError):", "x = f(a, key=3)"]
    for line in lines:
        new = same_meaning(line, rng)
        assert new is not None and new != line, line
    assert same_meaning("    return (", rng) is None  # a bracket spanning lines does not parse alone
    assert same_meaning("    except ValueError as exc:", rng) is None  # nothing to re-spell


def test_constructed_wrong_programs_are_not_canonical_and_hard_coding_varies():
    rng = random.Random(9)
    specs = list(tasks_by_id().values())[:40]
    mutants = [token_mutant(spec["reference"], rng) for spec in specs]
    assert sum(m is not None for m in mutants) >= 30
    for spec, mutant in zip(specs, mutants):
        if mutant is None:
            continue
        assert mutant != spec["reference"]
        shown = reformatted(mutant, rng)
        assert ast.dump(ast.parse(shown)) == ast.dump(ast.parse(mutant))  # re-spelled, not changed
        assert ast.unparse(ast.parse(shown)).strip() != shown.strip(), shown
    bodies = {hard_coded(spec, rng).split("\n", 1)[1].split()[0] for spec in specs}
    assert {"return", "if"} <= bodies and bodies - {"return", "if"}, bodies


def test_renamed_reads_the_fresh_names_but_not_attributes_or_keywords():
    assert renamed("    return a.b + f(b=a) + b\n", {"a": "x", "b": "y"}) == "    return x.b + f(b=x) + y\n"


def test_the_audit_hedge_is_drawn():
    rng = random.Random(1)
    hedges = {hedge(7, rng) for _ in range(40)}
    plain = {h for h in hedges if re.fullmatch(r"\nAnswer: 7 or 8", h)}
    assert len(hedges) >= 20 and len(plain) <= 1, hedges
    assert [h for h in hedges if "7" not in h.split("Answer:")[1]] == []  # hedges holds >= 20, asserted above


"""The probe's wrong SWE patches change the syntax tree, touch lines inside and beyond the gold change's hunks,
and still keep what the buggy program does (``probe_answers_swe``, ``probe_answers_rewrite``).

Written for held-out set b's attacks 1 and 2 (``tests/test_heldout_b45b.py``): every wrong patch re-spelled lines
with the same tree, inside the gold's hunks.  The records of these patches are written without running a test
(``probe_answers.swe_grade``); the last test grades drawn patches with the real grader in Docker and compares.
"""

from __future__ import annotations

import ast
import random

import pytest

from meta_agent.judge.probe_answers import swe_grade
from meta_agent.judge.probe_answers_swe import gold_spots, wrong_patch
from swe_env.checked import shipped_tasks
from swe_env.patch_format import parse_response
from swe_env.tasks import buggy_sources, gold_patch
from tests.test_probe_answers_forms import _apply, per_file


def _old_lines(patch: str) -> set[int]:
    """0-based old-file lines a patch removes."""
    out, at = set(), None
    for line in patch.splitlines():
        if line.startswith("@@ -"):
            at = int(line[4:].split(",")[0].split(" ")[0]) - 1
        elif at is not None and line[:1] in (" ", "-"):
            if line.startswith("-"):
                out.add(at)
            at += 1
    return out


def test_wrong_patches_change_the_tree_and_touch_inside_and_beyond_the_gold_hunks() -> None:
    tasks = shipped_tasks()
    assert len(tasks) >= 5
    for task in tasks:
        sources, gold = buggy_sources(task), gold_patch(task)
        shown = {path: {i for _, hunk in hunks for i in hunk} for path, hunks in gold_spots(gold).items()}
        places, styles = set(), set()
        for seed in range(8):
            patch = wrong_patch(gold, sources, random.Random(seed))
            assert patch is not None, task.id
            assert parse_response(f"```diff\n{patch}```", sources).status == "ok", patch
            changed = []
            for path, part in per_file(patch).items():
                patched = _apply(sources[path], part)
                changed.append(ast.dump(ast.parse(patched)) != ast.dump(ast.parse(sources[path])))
                removed = _old_lines(part)
                places.add(("inside" if removed & shown[path] else "") + ("beyond" if removed - shown[path] else ""))
            assert any(changed), patch  # a change of code
            styles.add(patch.startswith("diff --git "))
        assert "inside" in places and places & {"beyond", "insidebeyond"}, (task.id, places)
        assert len(styles) == 2, task.id


def test_one_probe_deals_inside_and_beyond_before_repeating() -> None:
    task = shipped_tasks()[3]
    sources, gold = buggy_sources(task), gold_patch(task)
    shown = {i for _, hunk in next(iter(gold_spots(gold).values())) for i in hunk}
    for seed in range(10):
        rng = random.Random(seed)
        first_two = [_old_lines(next(iter(per_file(wrong_patch(gold, sources, rng)).values()))) for _ in range(2)]
        assert sorted(bool(r - shown) for r in first_two) == [False, True], (seed, first_two)


@pytest.mark.docker
def test_drawn_wrong_patches_graded_for_real_keep_the_buggy_programs_outcomes() -> None:
    from swe_env.grade import grade

    rng = random.Random(11)
    for task in rng.sample(shipped_tasks(), 3):
        patch = wrong_patch(gold_patch(task), buggy_sources(task), rng)
        real = grade(task, patch)
        made = swe_grade(type("T", (), {"ground_truth": {"task_id": task.id}})(), patch, False)
        assert real.status == "unresolved", (task.id, real.status, real.detail, patch)
        assert real.tests == made["tests"], (task.id, patch)

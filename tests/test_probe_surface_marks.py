"""How a wrong SWE answer's surface is read and worn (``judge.probe_answers_surface``), on a shipped task's files.

Each mark worn on a constructed wrong patch parses as training parses it, reads back as the same mark, and keeps
the record true: the same edits as the bare patch (SEARCH/REPLACE, a made-up index, a notes file), or ``git
apply``'s own refusal (a miscounted header).
"""

from __future__ import annotations

import random

import pytest

from domains.swe import SweDomain
from harness_repo.contract import TaskSpec
from meta_agent.judge.probe_answers_surface import MARKS, Surface, marked, read_surface, task_files, worn_wrong_patch
from swe_env.patch_format import parse_response

TASK = "parse-1.21.1-microsecond-precision"


@pytest.fixture(scope="module")
def task():
    [task] = SweDomain().tasks("train", [TaskSpec(name=TASK)], 1, seed=1)
    return task


def _changed(patch: str) -> list[str]:
    return [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
            and "NOTES" not in ln]


@pytest.mark.parametrize("mark", MARKS)
def test_a_worn_mark_parses_reads_back_and_keeps_the_record_true(task, mark):
    sources, gold = task_files(task.task_id)
    for seed in range(4):
        rng = random.Random(seed)
        block, record = worn_wrong_patch(task, marked(Surface(), mark, rng), rng)
        parsed = parse_response(f"```diff\n{block}\n```", sources)
        assert parsed.status == "ok", (mark, seed, parsed)
        surface = read_surface(block, sources, gold)
        if mark == "search_replace":
            assert surface.form == "search_replace" and parsed.format == "search_replace"
        elif mark == "made_up_index":
            assert (surface.header, surface.index) == ("git", "made_up"), block[:200]
        elif mark == "miscount":
            assert surface.miscount != (0, 0) and record["status"] == "patch_failed", (block[:300], record)
            assert record["detail"].startswith("git apply failed: "), record
        else:
            assert surface.other is not None and surface.other[0] not in sources, block[-200:]
        if mark != "miscount":
            assert record is None  # the constructed grade (unresolved, the bug kept) holds


def test_the_policys_own_surface_reads_as_written(task):
    sources, gold = task_files(task.task_id)
    git = [ln for ln in gold.splitlines() if ln.startswith("diff --git")]
    assert read_surface(gold, sources, gold) == Surface("diff", "git" if git else "bare", "real" if git else "real")
    bare = "\n".join(ln for ln in gold.splitlines() if not ln.startswith(("diff --git", "index ")))
    assert read_surface(bare, sources, gold).header == "bare"
    made_up = gold.replace("index ", "index 1a2b3c4..5d6e7f8 100644\nold-index ", 1) if git else None
    if made_up:
        assert read_surface(made_up, sources, gold).index == "made_up"
    notes = bare + "\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+Fixed it.\n"
    assert read_surface(notes, sources, gold).other == ("NOTES.md", ("Fixed it.",))


@pytest.mark.docker
def test_worn_patches_graded_for_real_match_their_records(task):
    """Each mark and bare paths, worn on one constructed wrong patch, graded by the real grader in Docker: the
    status the probe records (unresolved by construction, or git's refusal) is the grader's."""
    from dataclasses import replace

    from swe_env.checked import load_task
    from swe_env.grade import grade

    sources, _ = task_files(task.task_id)
    rng = random.Random(11)
    for surface in [marked(Surface(), m, rng) for m in MARKS] + [replace(Surface(), prefixed=False)]:
        block, record = worn_wrong_patch(task, surface, rng)
        parsed = parse_response(f"```diff\n{block}\n```", sources)
        real = grade(load_task(TASK), parsed.patch)
        assert real.status == (record["status"] if record else "unresolved"), (surface, real.status, real.detail)

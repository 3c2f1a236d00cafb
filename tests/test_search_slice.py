"""The search arm proposes slice-mix on its exact evidence, as the recipe arm does (issue 44: the search arm must
not repair less than the recipe arm).

12j's off-exam-task at the small size (k2's cells, 2026-12-08): the recipe arm cut leg_counting's weight and
repaired it; the search arm previewed the same edit by generation on 4 tasks drawn by the new mix, which compares
different tasks, and withheld it.  A dead slice's weights are a property of harness.yaml sized by the finding's own
figures (``recipe_slice.slice_evidence``), re-read exactly on the branch, as a task-mix edit's are.  Real agents and
git; the generation preview answers from a record (one whose draw went the wrong way), never asked for slice-mix.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent
from tests.test_k38_slice import LEGS, SEED_TASKS, TWELVE_J, judged, planted, shares
from tests.test_s38_preview_veto import Recorded, _rates

OTHER_TASKS = {"branch": "iv/r1-slice-mix", "mode": "main:dead_slice", "symptom": "unsolved", "main": 0.75,
               "candidate": 0.9375, "interval": [0.0625, 0.25], "tasks": 4, "seconds": 20.0, "main_seconds": 10.0,
               "rates": _rates(identical=[0.0, 0.25], truncated=[0.0, 0.0], no_final_answer=[0.0, 0.0],
                               unsolved=[0.0625, 0.25])}
"""A preview of 4 tasks drawn by the new mix against 4 drawn by main's: different tasks, so the unsolved share
may rise by the draw alone (as here) or fall; neither is evidence about the weights."""


def test_the_search_arm_proposes_slice_mix_on_the_findings_exact_evidence(tmp_path: Path) -> None:
    tasks = [*SEED_TASKS, LEGS]
    repo = planted(tmp_path, tasks)
    preview = Recorded({"iv/r1-slice-mix": OTHER_TASKS})
    ctx = AgentContext(round=1, digest=judged(TWELVE_J, tasks), digest_markdown="", history=[], skills=[],
                       repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "r1", max_candidates=2,
                       generation_preview=preview)
    branches = [p.branch for p in SearchAgent().propose(ctx)]
    assert "iv/r1-slice-mix" in branches, branches
    assert "iv/r1-slice-mix" not in preview.asked
    cut = shares(yaml.safe_load(repo.read_file("iv/r1-slice-mix", "harness.yaml"))["tasks"])
    assert cut["leg_counting"] < shares(tasks)["leg_counting"] and cut["leg_counting"] <= 0.25, cut

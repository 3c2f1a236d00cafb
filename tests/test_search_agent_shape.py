"""The search agent proposes a step reshape and an exam-fitted budget on their exact evidence, not a preview.

A step's shape and the training budget against the exam's are properties of harness.yaml that a generation
preview of a few tasks cannot see (12i's one-prompt-steps: the preview read "identical difference [-0.19, +0.19]"
and withheld the recipe's right branch).  The trusted checks that named them, re-run on the branch, are the
evidence; no generation preview is asked for (the context has none here: a branch that needed one would be
withheld)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from test_a3_budget import EXAM, KNOBS, OVER, budget_modes
from test_a3_shape import ONE, ONE_PROMPT, judged
from test_stall import _repo

from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent


def _searched(repo, digest: dict, tmp_path: Path) -> tuple[list, list[dict]]:
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    proposals = SearchAgent().propose(ctx)
    return proposals, json.loads((tmp_path / "r0" / "search_agent.json").read_text())["recipe_previews"]


def test_the_search_proposes_12i_s_reshape_on_the_shape_check_re_run(tmp_path: Path) -> None:
    repo = _repo(tmp_path, **ONE)
    proposals, previews = _searched(repo, judged(ONE_PROMPT, **ONE), tmp_path)
    assert [p.branch for p in proposals] == ["iv/r0-larger-groups"], (proposals, previews)
    grpo = yaml.safe_load(repo.read_file(proposals[0].branch, "harness.yaml"))["grpo"]
    assert grpo["group_size"] * grpo["prompts_per_step"] == 16 and grpo["prompts_per_step"] > 1, grpo
    [kept] = [p for p in previews if p["proposed"]]
    assert kept["mode"] == "main:step_shape" and kept["preview_seconds"] == 0.0 and kept["score"] is None, kept


def test_the_search_proposes_12i_s_exam_fitted_budget_on_the_budget_check_re_run(tmp_path: Path) -> None:
    """12i's budget-over-exam: 384 tokens where the exam generates 96."""
    assert [m["name"] for m in budget_modes(OVER, 384)] == ["main:budget_over_exam"]
    repo = _repo(tmp_path, **KNOBS, max_completion_length=384)
    proposals, previews = _searched(repo, judged(OVER, **KNOBS, max_completion_length=384), tmp_path)
    assert [p.branch for p in proposals] == ["iv/r0-truncation"], (proposals, previews)
    budget = yaml.safe_load(repo.read_file(proposals[0].branch, "harness.yaml"))["grpo"]["max_completion_length"]
    assert budget <= EXAM, budget
    [kept] = [p for p in previews if p["proposed"]]
    assert kept["mode"] == "main:budget_over_exam" and kept["preview_seconds"] == 0.0, kept

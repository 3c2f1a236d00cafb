"""A policy that does not move is named and let move (``main:policy_stalled``, ``unstall``).

The plant is of our own: main's learning rate at 1e-9, far below anything that moves a float32 weight under Adam's
sign-like steps (12c's kl-anchor, the KL coefficient at its maximum, stays held out).  Its evidence is what two real
TRL rounds of the math seed recorded (``tests/data/stall_exams.json``: 2 steps of 4 groups of 4 each, a 48-task
greedy exam after each round, SmolLM2-135M on CPU; written by ``bench/bench_stall.py``): at 1e-9 round 1 answered
the exam as round 0 did; at the seed's own rate the answers moved.  Real git for the recipe; no model here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings

DATA = json.loads((Path(__file__).parent / "data" / "stall_exams.json").read_text())
RANGE = (0.0, 1.0)


def _digest(arm: str, before: str = "round0") -> dict:
    """Round 1's digest of ``arm``, judged against the exam of the round it trained from (``before``)."""
    run = DATA[arm]
    digest: dict = {"round": 1, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], RANGE, exam=run["round1"]["heldout"], exam_before=run[before],
                      knobs=run["knobs"], metrics=run["round1"]["metrics"])
    return digest


def _stalled(digest: dict) -> dict | None:
    return next((m for m in digest["failure_modes"] if m["name"] == "main:policy_stalled"), None)


@pytest.mark.xfail(strict=True, reason="no check asks whether the round moved the policy: the stall is unnamed")
def test_a_round_that_left_the_exam_as_it_was_is_named_with_its_evidence() -> None:
    digest = _digest("stalled", before="round0_heldout")
    found = _stalled(digest)
    assert found is not None, digest.get("main_checks")
    assert found["severity"] == "error" and found["rate"] == 1.0, found
    assert found["evidence"]["tasks"] == 48 and found["evidence"]["learning_rate"] == 1e-9, found["evidence"]
    assert len(found["examples"]) == 3 and all(e["response"] for e in found["examples"]), found["examples"]
    assert digest["main_checks"]["policy_stalled"]["passed"] is False


def _repo(tmp_path: Path, **knobs) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(knobs)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "plant")
    return repo


def _propose(repo: HarnessRepo, digest: dict, tmp_path: Path) -> list:
    ctx = AgentContext(round=1, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r1", max_candidates=1)
    return RecipeAgent().propose(ctx)


@pytest.mark.xfail(strict=True, reason="no finding, no recipe: the learning rate stays at 1e-9")
def test_the_recipe_raises_the_learning_rate_by_what_the_exam_resolved(tmp_path: Path) -> None:
    repo = _repo(tmp_path, learning_rate=1e-9)
    [p] = _propose(repo, _digest("stalled", before="round0_heldout"), tmp_path)
    assert p.branch == "iv/r1-unstall" and p.files_changed == ["harness.yaml"], p
    grpo = yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["grpo"]
    assert grpo["learning_rate"] == pytest.approx(1e-8), grpo  # nothing moved: x10, the most a round


@pytest.mark.xfail(strict=True, reason="no finding, no recipe: beta stays")
def test_a_kl_anchor_is_loosened_by_the_same_evidence_first(tmp_path: Path) -> None:
    """beta > 0 holds the policy to its reference: the share that moved scales it (nothing moved: off)."""
    repo = _repo(tmp_path, learning_rate=1e-9, beta=0.5)
    [p] = _propose(repo, _digest("stalled", before="round0_heldout"), tmp_path)
    grpo = yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["grpo"]
    assert grpo["beta"] == 0.0 and grpo["learning_rate"] == 1e-9, grpo

"""A policy that does not move is named and let move (``main:policy_stalled``, ``unstall``).

The plant is of our own: main's learning rate at 1e-9, far below anything that moves a float32 weight under Adam's
sign-like steps (12c's kl-anchor, the KL coefficient at its maximum, stays held out).  Its evidence is what two real
TRL rounds of the math seed recorded (``tests/data/stall_exams.json``: 2 steps of 4 groups of 4 each, a 48-task
greedy exam after each round, SmolLM2-135M on CPU, 2026-12-07; ``bench/bench_stall.py`` runs the same rounds): at 1e-9
round 1 answered all 48 tasks as round 0 did; at the seed's 2e-5, 19 of 48.  Real git for the recipe; no model here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_recipe_agent import SETTINGS, World, gate_view, world  # noqa: F401 - world: the gate test's fixture

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings

DATA = json.loads((Path(__file__).parent / "data" / "stall_exams.json").read_text())
RANGE = (0.0, 1.0)


def _digest(arm: str, before: str = "round0_heldout") -> dict:
    """Round 1's digest of ``arm``, judged against the exam of the round it trained from (``before``)."""
    run = DATA[arm]
    digest: dict = {"round": 1, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], RANGE, exam=run["round1"]["heldout"], exam_before=run[before],
                      knobs=run["knobs"], metrics=run["round1"]["metrics"])
    return digest


def _stalled(digest: dict) -> dict | None:
    return next((m for m in digest["failure_modes"] if m["name"] == "main:policy_stalled"), None)


def test_a_round_that_left_the_exam_as_it_was_is_named_with_its_evidence() -> None:
    digest = _digest("stalled", before="round0_heldout")
    found = _stalled(digest)
    assert found is not None, digest.get("main_checks")
    assert found["severity"] == "error" and found["rate"] == 1.0, found
    assert found["evidence"]["tasks"] == 48 and found["evidence"]["learning_rate"] == 1e-9, found["evidence"]
    assert len(found["examples"]) == 3 and all(e["response"] for e in found["examples"]), found["examples"]
    assert digest["main_checks"]["policy_stalled"]["passed"] is False


def test_a_round_that_trained_is_not_named() -> None:
    digest = _digest("trained", before="round0_heldout")
    assert _stalled(digest) is None, _stalled(digest)
    assert digest["main_checks"]["policy_stalled"]["passed"] is True


def test_round_0_has_only_the_base_verdicts_and_names_nothing_but_says_so() -> None:
    run = DATA["stalled"]
    digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], RANGE, exam=run["round0_heldout"], exam_before=run["base_outcomes"],
                      knobs=run["knobs"], metrics=[])
    assert _stalled(digest) is None
    assert "not measured" in digest["main_checks"]["policy_stalled"]["detail"], digest["main_checks"]


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


def test_the_recipe_raises_the_learning_rate_by_what_the_exam_resolved(tmp_path: Path) -> None:
    repo = _repo(tmp_path, learning_rate=1e-9)
    [p] = _propose(repo, _digest("stalled", before="round0_heldout"), tmp_path)
    assert p.branch == "iv/r1-unstall" and p.files_changed == ["harness.yaml"], p
    grpo = yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["grpo"]
    assert grpo["learning_rate"] == pytest.approx(1e-8), grpo  # nothing moved: x10, the most a round


def test_a_kl_anchor_is_loosened_by_the_same_evidence_first(tmp_path: Path) -> None:
    """beta > 0 holds the policy to its reference: the share that moved scales it (nothing moved: off)."""
    repo = _repo(tmp_path, learning_rate=1e-9, beta=0.5)
    [p] = _propose(repo, _digest("stalled", before="round0_heldout"), tmp_path)
    grpo = yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["grpo"]
    assert grpo["beta"] == 0.0 and grpo["learning_rate"] == 1e-9, grpo


def test_at_the_trainers_highest_rate_the_recipe_declines_and_says_why(tmp_path: Path) -> None:
    from meta_agent.agents.recipe_stall import unstall
    from meta_agent.agents.recipe_types import HarnessFiles
    repo = _repo(tmp_path, learning_rate=1e-2)
    why = unstall(_digest("stalled", before="round0_heldout"), HarnessFiles.read(repo))
    assert isinstance(why, str) and "highest" in why, why


def test_the_evidence_is_read_from_a_real_archive_as_the_digest_phase_would(tmp_path: Path) -> None:
    """``stall_evidence`` reads the round's exam and the exam of the round it trained from out of the archive (rows
    written by the archive's own writer), and the digest names the stall from them."""
    from meta_agent.stall_checks import stall_evidence
    from rl_backend.archive import Archive
    from trajectory.rows import trajectory_row
    run, archive = DATA["stalled"], Archive(tmp_path / "archive")
    for n, exam in ((0, run["round0_heldout"]), (1, run["round1"]["heldout"])):
        archive.append_round("r", n, [trajectory_row(
            traj_id=f"h{n}-{i}", run_id="r", round=n, step=0, group_id=f"h{i}", sample_idx=0, domain="math",
            task_id=e["task_id"], data_source="reasoning_gym/chain_sum", split="heldout", prompt="q",
            response=e["response"], verified=e["verified"], response_tokens=4, truncated=False,
            finish_reason="stop") for i, e in enumerate(exam)])
    digest: dict = {"round": 1, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], RANGE, **stall_evidence(archive, "r", 1, 0, run["base_outcomes"], run["knobs"],
                                                           run["round1"]["metrics"]))
    assert _stalled(digest) is not None and _stalled(digest)["rate"] == 1.0, digest["main_checks"]
    first: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(first, [], RANGE, **stall_evidence(archive, "r", 0, None, run["base_outcomes"], run["knobs"],
                                                          []))
    assert _stalled(first) is None and "only its verdicts" in first["main_checks"]["policy_stalled"]["detail"]


def test_the_search_agent_proposes_the_same_step_unpreviewed(tmp_path: Path) -> None:
    """A change of how the policy trains changes no generated batch: no preview ranks it, and the fired recipe is
    proposed as it is (``preview_evidence.trains_only``)."""
    from meta_agent.agents.search import SearchAgent
    repo = _repo(tmp_path, learning_rate=1e-9)
    ctx = AgentContext(round=1, digest=_digest("stalled", before="round0_heldout"), digest_markdown="", history=[],
                       skills=[], repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "r1",
                       max_candidates=1)
    assert [p.branch for p in SearchAgent().propose(ctx)] == ["iv/r1-unstall"]


@pytest.mark.docker
def test_gate_merges_unstall_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    """The recipe's branch on a seed harness at 1e-9, judged by the gate: training knobs only, rewards and keep masks
    are main's, so it merges on probation (only the next round's exam can show the policy moving)."""
    from meta_agent.agents.recipe_stall import unstall
    from meta_agent.backtest import backtest_branch
    from test_recipe_agent import propose
    repo = _repo(tmp_path, learning_rate=1e-9)
    digest = dict(world.digests["unanswered"], round=1)
    add_main_findings(digest, [], RANGE, exam=DATA["stalled"]["round1"]["heldout"],
                      exam_before=DATA["stalled"]["round0_heldout"], knobs=DATA["stalled"]["knobs"], metrics=[])
    [p] = propose(repo, digest, rules=(unstall,))
    assert p.branch == "iv/r1-unstall" and repo.config(p.branch).grpo.learning_rate == pytest.approx(1e-8)
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"heldout_accuracy increase": "live"}

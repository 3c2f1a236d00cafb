"""main's task mix judged against the trusted exam's (issue 44): a flaw of our own, planted in main's harness.yaml
(products, half of the exam, weighs 1.0; chain_sum, the other half, 0.08), is named ``main:task_mix`` from what the
round already has (main's weights, the domain's ``eval_specs``), and the recipe moves the weights to the exam's
shares, the over-trained kind down as the under-trained one rises.  Real git; no model."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings


def _planted(tmp_path: Path, chain_sum: float, products: float) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    for task in config["tasks"]:
        task["weight"] = chain_sum if task["name"] == "chain_sum" else products
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "weights")
    return repo


def _digest(repo: HarnessRepo) -> dict:
    digest: dict = {"round": 0, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], (0.0, 1.0), exam_specs=MathDomain().eval_specs,
                      train_tasks=yaml.safe_load(repo.read_file("main", "harness.yaml"))["tasks"])
    return digest


def test_a_kind_the_exam_weighs_but_main_barely_trains_is_named_and_reweighted(tmp_path: Path) -> None:
    repo = _planted(tmp_path, chain_sum=0.08, products=1.0)
    digest = _digest(repo)
    [mix] = [m for m in digest["failure_modes"] if m["name"] == "main:task_mix"]
    assert mix["severity"] == "warning" and mix["rate"] == 0.5, mix  # chain_sum is half of the exam
    assert mix["shares"]["chain_sum"] == {"train": round(0.08 / 1.08, 4), "exam": 0.5}, mix
    assert not digest["main_checks"]["task_mix"]["passed"]
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.branch == "iv/r0-exam-mix" and proposal.files_changed == ["harness.yaml"], proposal
    weights = {t["name"]: t["weight"] for t in yaml.safe_load(repo.read_file(proposal.branch, "harness.yaml"))["tasks"]}
    assert weights == {"chain_sum": 0.5, "products": 0.5}, weights  # products down, chain_sum up: the exam's


def test_a_mix_the_exam_shares_is_not_named(tmp_path: Path) -> None:
    digest = _digest(_planted(tmp_path, chain_sum=1.0, products=0.6))  # 0.375 of the mix: over half of 0.5
    assert [m["name"] for m in digest["failure_modes"]] == [] and digest["main_checks"]["task_mix"]["passed"]


def test_the_search_agent_proposes_the_reweighting_on_the_check_re_run_not_a_preview(tmp_path: Path) -> None:
    """A task-mix edit is a generation edit the backtest cannot see; its symptom is harness.yaml itself, so its
    evidence is the trusted check re-run on the branch (exact): no generation preview is asked for."""
    from meta_agent.agents.search import SearchAgent
    repo = _planted(tmp_path, chain_sum=0.08, products=1.0)
    ctx = AgentContext(round=0, digest=_digest(repo), digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    assert [p.branch for p in SearchAgent().propose(ctx)] == ["iv/r0-exam-mix"]
    [kept] = json.loads((tmp_path / "r0" / "search_agent.json").read_text())["recipe_previews"]
    assert kept == {"key": "exam-mix:chain_sum=0.5,products=0.5", "mode": "main:task_mix", "score": None,
                    "why": "the branch passes the check main fails", "withheld": "", "preview_seconds": 0.0,
                    "proposed": True}, kept

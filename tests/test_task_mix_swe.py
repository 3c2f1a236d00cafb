"""main:task_mix in SWE, where a task name is ``all``, a package or a task id (``domains.swe``).

The exam's ``all`` draws the held-out split (cachetools 2, parse 1, sqlparse 1 on this machine); training draws the
train split (parse 4, sqlparse 2, no cachetools).  Names compared flatly call a harness that trains every package by
name "untrained on the whole exam", and one task id against ``all`` the same; compared by what each name draws (its
packages), the first has no gap and the second leaves sqlparse untrained.  A package the train split has no task of
(cachetools) is no harness's gap.  Real git, the shipped SWE tasks; no model, no Docker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domains.swe import SweDomain
from harness_repo.contract import TaskSpec
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings

RANGE = (-1.0, 1.0)
ONE_PARSE_TASK = "parse-1.20.2-hyphen-field-names"


def _mix(train: list[dict], exam: list[str]) -> tuple[dict, dict | None]:
    """The digest of a round whose main trains ``train`` against an exam of ``exam``, and its task_mix finding."""
    digest: dict = {"round": 0, "domain": "swe", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], RANGE, train_tasks=train,
                      exam_specs=SweDomain([TaskSpec(name=n) for n in exam]).eval_specs)
    found = [m for m in digest["failure_modes"] if m["name"] == "main:task_mix"]
    return digest, (found[0] if found else None)


def test_all_spelled_as_its_packages_is_no_gap() -> None:
    digest, found = _mix([{"name": "parse", "weight": 1.0}, {"name": "sqlparse", "weight": 1.0}], ["all"])
    assert found is None, found
    assert digest["main_checks"]["task_mix"]["passed"]


def test_one_package_against_an_exam_of_two_is_a_gap_of_the_other() -> None:
    _, found = _mix([{"name": "parse", "weight": 1.0}], ["parse", "sqlparse"])
    assert found is not None and found["rate"] == 0.5, found
    assert found["shares"]["sqlparse"] == {"train": 0.0, "exam": 0.5}, found["shares"]
    assert [e["task"] for e in found["examples"]] == ["sqlparse"]


def test_one_task_id_against_all_leaves_the_other_package_untrained_not_the_whole_exam() -> None:
    _, found = _mix([{"name": ONE_PARSE_TASK, "weight": 1.0}], ["all"])
    assert found is not None and found["rate"] == 0.25, found  # sqlparse: 1 of the 4 held-out tasks
    assert set(found["shares"]) == {"parse", "sqlparse"}, found["shares"]  # cachetools: no train task to weigh
    assert found["shares"]["parse"]["train"] == 1.0 and found["shares"]["sqlparse"]["train"] == 0.0
    assert "cachetools" in found["message"], found["message"]


def test_the_seed_mix_against_the_default_exam_is_no_gap() -> None:
    digest, found = _mix([{"name": "all", "weight": 1.0}], ["all"])
    assert found is None and "cachetools" in digest["main_checks"]["task_mix"]["detail"], digest["main_checks"]


@pytest.fixture()
def one_task_repo(tmp_path: Path) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "swe")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = [{"name": ONE_PARSE_TASK, "weight": 1.0}]
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "one task")
    return repo


def test_the_recipe_trains_each_package_at_the_exam_share_and_the_branch_passes_the_check(
        one_task_repo: HarnessRepo, tmp_path: Path) -> None:
    repo = one_task_repo
    digest, found = _mix(yaml.safe_load(repo.read_file("main", "harness.yaml"))["tasks"], ["all"])
    assert found is not None
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.branch == "iv/r0-exam-mix" and proposal.files_changed == ["harness.yaml"], proposal
    tasks = yaml.safe_load(repo.read_file(proposal.branch, "harness.yaml"))["tasks"]
    assert {t["name"]: t["weight"] for t in tasks} == {"parse": 0.5, "sqlparse": 0.5}, tasks
    SweDomain().check_task_specs([TaskSpec(**t) for t in tasks])  # names the trainer accepts
    again, left = _mix(tasks, ["all"])
    assert left is None and again["main_checks"]["task_mix"]["passed"], left


def test_the_search_agent_proposes_the_same_rewrite_on_the_check_re_run(one_task_repo: HarnessRepo,
                                                                       tmp_path: Path) -> None:
    from meta_agent.agents.search import SearchAgent
    repo = one_task_repo
    digest, _ = _mix(yaml.safe_load(repo.read_file("main", "harness.yaml"))["tasks"], ["all"])
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    assert [p.branch for p in SearchAgent().propose(ctx)] == ["iv/r0-exam-mix"]
    tasks = yaml.safe_load(repo.read_file("iv/r0-exam-mix", "harness.yaml"))["tasks"]
    assert {t["name"]: t["weight"] for t in tasks} == {"parse": 0.5, "sqlparse": 0.5}, tasks

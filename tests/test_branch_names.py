"""Branch names say what changed (``iv/r<n>-<slug>`` from the change, never a counter), and a name already in
the harness is never reused: not one of this run, nor one inherited from the parent line via --from-branch."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness_repo.gitcmd import HarnessError
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext, change_slug, free_branch
from meta_agent.agents.recipe import RecipeAgent
from review_run import demo_run

pytestmark = pytest.mark.docker


def test_change_slug_names_the_change():
    assert change_slug("Read a final \\boxed{} answer in the reward, as the verifier does") == \
        "read-final-boxed-answer-reward"
    assert change_slug("!!!") == "change"


def test_a_new_line_inherits_the_parents_names_and_never_reuses_them(tmp_path_factory, tmp_path):
    parent = demo_run(tmp_path_factory) / "harness"
    line = HarnessRepo.clone_line(parent, "main", tmp_path / "line")
    assert line.branch_exists("iv/r0-verifier-answers")  # the parent's iv/r0-* come along
    with pytest.raises(HarnessError, match="already exists"):
        line.start_intervention(0, "verifier-answers", worktree_root=tmp_path / "wt")
    assert free_branch(line, 0, "verifier-answers") == "verifier-answers-2"
    assert free_branch(line, 0, "format-bonus") == "format-bonus-2"
    assert free_branch(line, 1, "verifier-answers") == "verifier-answers"


def test_the_recipe_agent_takes_a_free_name_when_its_rule_name_is_taken(tmp_path_factory, tmp_path):
    """A rejected branch of the rule's name, with another change (as a parent line can leave): the recipe's
    branch gets the next free name instead of failing the round."""
    run = demo_run(tmp_path_factory)
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(0, "verifier-answers", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text("another change under the same name\n")
    repo.commit(wt, "Something else", {"Hypothesis": "h", "Predicted-Effect": ["miss_rate decrease"]})
    repo.remove_worktree(wt)
    subprocess.run(["git", "-C", str(repo.path), "tag", "-a", "verdict/iv/r0-verifier-answers", "-m",
                    "rejected: parent line"], check=True)
    digest = json.loads((run / "rounds/0/digest.json").read_text())
    ctx = AgentContext(round=0, digest=digest, digest_markdown="# round 0\n",
                       history=[iv.__dict__ for iv in repo.interventions()], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "round", max_candidates=2)
    proposals = RecipeAgent().propose(ctx)
    assert [p.branch for p in proposals] == ["iv/r0-verifier-answers-2"]
    assert repo.intervention("iv/r0-verifier-answers").subject == "Something else"  # the old one untouched

"""A generation-only merge needs preview evidence (issue 44): a recipe's knob edit that the backtest cannot see is
proposed by the search agent only when the generation preview moves the mode's symptom the right way, with an
interval that excludes zero, and the solve rate does not fall beyond noise.

Planted: a round whose zero-variance share fires ``dynamic-sampling`` (it drops flat groups from the loss; the batch
the policy generates is the same under it, so no preview can show it moving the symptom).  Before the rule the
search agent proposed it on its prediction alone, and the gate merged it on probation.  Real model, real Docker,
real git; the harness's budget is 8 tokens so the two generated batches stay cheap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents import search
from meta_agent.agents.search import SearchAgent
from meta_agent.generation_preview import GenerationPreview
from rl_backend.model import resolve_model

pytestmark = pytest.mark.docker


def _ctx(tmp_path: Path, repo: HarnessRepo, preview: GenerationPreview, name: str, evidence: dict) -> AgentContext:
    digest = {"round": 0, "domain": "math", "zero_variance_share": 0.7, "evidence": evidence,
              "failure_modes": [{"name": "zero_variance_groups", "severity": "warning", "rate": 0.7}]}
    return AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                        worktree_root=tmp_path / "wt", round_dir=tmp_path / name, max_candidates=1,
                        generation_preview=preview)


def test_a_recipe_knob_edit_is_proposed_only_on_preview_evidence(tmp_path: Path, docker_sandbox,
                                                                  monkeypatch) -> None:
    """A sampler at 0.05 repeats itself: warm-sampling's preview shows the repeats fall on every task (kept);
    dynamic-sampling's batch is the same as main's (withheld, its branch deleted)."""
    # the search's own knob edits for the mode are covered in test_generation_preview; here only the recipes'
    monkeypatch.setitem(search.KNOBS_OF, "zero_variance_groups", ())
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    text = repo.read_file("main", "harness.yaml").replace("max_completion_length: 32", "max_completion_length: 8")
    repo.commit_files({"harness.yaml": text.replace("temperature: 0.7", "temperature: 0.05")},
                      "A budget of 8 tokens, sampled at 0.05")
    preview = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp", seed=0)
    # verified_rate 0.5: groups of 4 already mix outcomes, so larger-groups does not fire
    warm = SearchAgent().propose(_ctx(tmp_path, repo, preview, "a", {"verified_rate": 0.5, "identical_share": 0.8}))
    assert [p.branch for p in warm] == ["iv/r0-warm-sampling"], warm
    [kept] = json.loads((tmp_path / "a" / "search_agent.json").read_text())["recipe_previews"]
    assert kept["proposed"] and kept["withheld"] == "" and kept["mode"] == "zero_variance_groups", kept
    record = json.loads((tmp_path / "gp" / "iv_r0-warm-sampling.json").read_text())
    assert record["symptom"] == "identical" and record["interval"][1] < 0, record

    proposals = SearchAgent().propose(_ctx(tmp_path, repo, preview, "b", {"verified_rate": 0.5}))
    assert "iv/r0-dynamic-sampling" not in [p.branch for p in proposals], proposals
    rules = {e["rule"]: e for e in json.loads((tmp_path / "b" / "recipe_agent.json").read_text())["rules"]}
    withheld = rules["dynamic-sampling"]
    assert withheld["fired"] and "branch" not in withheld, withheld
    assert withheld["reason"].startswith("withheld: no preview evidence"), withheld
    record = json.loads((tmp_path / "gp" / "iv_r0-dynamic-sampling.json").read_text())
    assert record["symptom"] == "identical" and record["interval"] == [0.0, 0.0], record  # the same batch
    assert "iv/r0-dynamic-sampling" not in {b.name for b in repo._repo.branches}  # deleted, never judged

"""Held-out finding of the sixth set (``bench/heldout_flaws_2026_12f.py``, misnamed-finding, run after recipe set 8
froze): the search agent's preview-evidence rule takes a diagnostics-only change for a generation edit.

Until recipe set 9, ``search.family_of`` called every change that is not reward.py or filters.py alone
"generation", so the recipe's restore-diagnostic (``diagnostics/zero_variance.py`` alone; training is exactly
main's) is previewed by generation, where no symptom can move, and withheld: the recipe arm proposed it, the search
arm did not.  Fixed after the run (set 9: only a change touching harness.yaml or prompts/ is a generation edit),
not held-out tested.  Real git; no model."""

from __future__ import annotations

import json
from pathlib import Path


from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent


def test_a_diagnostics_only_repair_is_not_held_to_the_generation_rule(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    text = repo.read_file("main", "diagnostics/zero_variance.py")
    repo.commit_files({"diagnostics/zero_variance.py": text.replace('"name": "zero_variance"',
                                                                     '"name": "zero-variance"')}, "diagnostic")
    digest = {"round": 0, "domain": "math", "evidence": {}, "failure_modes": [
        {"name": "zero_variance_groups", "source": "trusted", "severity": "warning", "rate": 1.0}]}
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    proposals = SearchAgent().propose(ctx)
    rules = {e["rule"]: e for e in json.loads((tmp_path / "r0" / "recipe_agent.json").read_text())["rules"]}
    assert [p.branch for p in proposals] == ["iv/r0-restore-diagnostic"], rules["restore-diagnostic"]

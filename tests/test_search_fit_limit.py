"""The search arm proposes fit-limit on a kind the trainer drops for length on its exact evidence, as the recipe arm
does (12k's kind-over-prompt-budget at recipe set 17: the recipe arm repaired it, the search arm withheld it).

A generation preview renders the tasks it draws and never applies the trainer's length filter, so it saw the edit
"move nothing" ([+0.000, +0.000]) and the veto stopped it.  The finding's measured lengths are the evidence: every
prompt measured fits the branch's ``max_prompt_length`` (``recipe_limits.limit_evidence``).  Real agents and git;
the preview answers from the record that cell wrote and is never asked for fit-limit.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent
from tests.test_r3_trainer_prompts import SEED_USER, TIGHT, names, pytestmark  # noqa: F401 (the skip)
from tests.test_s38_preview_veto import Recorded, _rates

UNMOVED = {"branch": "iv/r0-fit-limit", "mode": "main:prompt_length", "symptom": "unsolved", "main": 1.0,
           "candidate": 1.0, "interval": [0.0, 0.0], "tasks": 4, "seconds": 17.2, "main_seconds": 10.0,
           "rates": _rates(identical=[0.0, 0.0], truncated=[0.0, 0.0], no_final_answer=[0.0, 0.0],
                           unsolved=[0.0, 0.0])}


def test_the_search_arm_proposes_fit_limit_on_the_measured_lengths(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"harness.yaml": yaml.safe_dump(TIGHT, sort_keys=False)}, "plant")
    found = names(SEED_USER, TIGHT)["main:prompt_length"]
    digest = {"round": 0, "domain": "math", "evidence": {}, "failure_modes": [found]}
    preview = Recorded({"iv/r0-fit-limit": UNMOVED})
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=2,
                       generation_preview=preview)
    branches = [p.branch for p in SearchAgent().propose(ctx)]
    assert "iv/r0-fit-limit" in branches, branches
    assert "iv/r0-fit-limit" not in preview.asked
    limit = yaml.safe_load(repo.read_file("iv/r0-fit-limit", "harness.yaml"))["grpo"]["max_prompt_length"]
    assert limit >= found["evidence"]["longest"], limit

"""The search arm proposes strip-markup on its exact evidence, as the recipe arm does (issue 44: the search arm must
not repair less than the recipe arm).

A template writing the policy's chat markup by hand (12k's hand-templated-prompt, in-sample): the markup is a fact of
the templates' text, so the branch's evidence is the check re-read on it (``recipe_markup.markup_evidence``: none of
the finding's tokens left), not a generation preview of 4 tasks whose draw may go either way.  Real agents and git;
the preview answers from a record whose draw went the wrong way and is never asked for strip-markup.
"""

from __future__ import annotations

from pathlib import Path


from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent
from tests.test_r3_trainer_prompts import MARKED_USER, SEED_CONFIG, names, pytestmark  # noqa: F401 (the skip)
from tests.test_s38_preview_veto import Recorded, _rates

WORSE = {"branch": "iv/r0-strip-markup", "mode": "main:chat_markup", "symptom": "no_final_answer", "main": 0.5,
         "candidate": 0.75, "interval": [0.0625, 0.4375], "tasks": 4, "seconds": 20.0, "main_seconds": 10.0,
         "rates": _rates(identical=[0.0, 0.0], truncated=[0.0, 0.0], no_final_answer=[0.0625, 0.4375],
                         unsolved=[0.0, 0.0])}


def test_the_search_arm_proposes_strip_markup_on_the_templates_text(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/user.j2": MARKED_USER}, "plant")
    digest = {"round": 0, "domain": "math", "evidence": {},
              "failure_modes": [names(MARKED_USER, SEED_CONFIG)["main:chat_markup"]]}
    preview = Recorded({"iv/r0-strip-markup": WORSE})
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=2,
                       generation_preview=preview)
    branches = [p.branch for p in SearchAgent().propose(ctx)]
    assert "iv/r0-strip-markup" in branches, branches
    assert "iv/r0-strip-markup" not in preview.asked
    assert "<|im_start|>" not in repo.read_file("iv/r0-strip-markup", "prompts/user.j2")

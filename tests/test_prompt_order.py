"""Prompts that ask for the Answer: line before the working (issue 44): the answer is committed before any working
is written, and under a short budget the working is what gets cut.  Flaws of our own wording (not the held-out
set's): ``prompt_align.aligned`` asks for the working first and the Answer: line last, and moves a worked example's
Answer: line below its working; the search agent offers that as its aligned prompt edit."""

from __future__ import annotations

import yaml

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents.prompt_align import aligned
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.agents.search import candidates

FIRST_SYSTEM = ("You are good at sums. Begin with the line \"Answer: <number>\" and then show your working.\n\n"
                "Sample:\nQuestion: What is 23 * 3?\nReply:\nAnswer: 69\n23 * 3 = 69, since 20 * 3 = 60 and "
                "3 * 3 = 9.\n")
FIRST_USER = "{{ question }}\n\nPut \"Answer: <number>\" first; afterwards give the steps.\n"


def test_an_answer_first_instruction_asks_for_the_working_first_and_the_line_last() -> None:
    system, user = aligned(FIRST_SYSTEM), aligned(FIRST_USER)
    for text, working in ((system, "show your working"), (user, "give the steps")):
        low = text.lower()
        assert "begin with" not in low and "first" not in low and "afterwards" not in low, text
        assert working in low and low.index(working) < low.index("answer: <number>"), text
    assert system.startswith("You are good at sums. Show your working, then end with the line "
                             "\"Answer: <number>\"."), system
    assert "Reply:\n23 * 3 = 69, since 20 * 3 = 60 and 3 * 3 = 9.\nAnswer: 69\n" in system, system


def test_the_search_agent_offers_the_reordered_prompt() -> None:
    config = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())
    files = HarnessFiles(yaml.safe_dump(config), (SEEDS_DIR / "math" / "reward.py").read_text(), FIRST_USER,
                         system_prompt=FIRST_SYSTEM)
    [edit] = [c for c in candidates("prompt", files, "no_final_answer") if c.key == "search:aligned-answer-line"]
    assert sorted(edit.files) == ["prompts/system.j2", "prompts/user.j2"], edit.files


def test_a_prompt_that_already_asks_for_the_line_last_is_left_alone() -> None:
    seed_system = (SEEDS_DIR / "math" / "prompts" / "system.j2").read_text()
    seed_user = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
    assert aligned(seed_system) == seed_system and aligned(seed_user) == seed_user
    later = "Explain first, then finish with \"Answer: <number>\".\n\nExample:\n2 + 2 = 4\nAnswer: 4\n"
    assert aligned(later) == later


def _order_digest(system: str, user: str) -> dict:
    from test_worked_example import QUESTIONS, digest_of, rows_of
    return digest_of(rows_of(system, user, QUESTIONS))


def test_main_asking_for_the_answer_before_the_working_is_named() -> None:
    digest = _order_digest(FIRST_SYSTEM, FIRST_USER)
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:answer_first"]
    assert found["severity"] == "warning" and found["rate"] == 1.0, found
    kinds = sorted((w["role"], w["kind"]) for w in found["evidence"]["found"])
    assert kinds == [("system", "example"), ("system", "instruction"), ("user", "instruction")], kinds
    assert "answer_first" in digest["main_checks"] and not digest["main_checks"]["answer_first"]["passed"]
    seed = (SEEDS_DIR / "math" / "prompts")
    assert _order_digest((seed / "system.j2").read_text(), (seed / "user.j2").read_text())["failure_modes"] == []


def test_the_recipe_reorders_mains_prompts_and_the_branch_is_clean(tmp_path) -> None:
    from harness_repo.repo import HarnessRepo
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe import RecipeAgent
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": FIRST_SYSTEM, "prompts/user.j2": FIRST_USER}, "answer first")
    ctx = AgentContext(round=0, digest=_order_digest(FIRST_SYSTEM, FIRST_USER), digest_markdown="", history=[],
                       skills=[], repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0",
                       max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.branch == "iv/r0-answer-last" and proposal.files_changed == ["prompts/system.j2",
                                                                                 "prompts/user.j2"], proposal
    system, user = (repo.read_file(proposal.branch, p) for p in proposal.files_changed)
    assert _order_digest(system, user)["failure_modes"] == []
    assert system == aligned(FIRST_SYSTEM) and "23 * 3 = 69, since" in system, system

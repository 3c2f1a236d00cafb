"""Worked examples whose reply does not end on the line the verifier reads (issue 44, session 37, e1).

The prompt asks for ``Answer: <number>`` and shows an example whose reply ends otherwise; a small policy imitates
the example, so most replies carry no final answer the verifier reads.  Flaws of our own planted in main's
templates: the seed's example ending in prose, a few-shot block whose shot ends ``= 42``, an example ending ``The
answer is 42.``, and two examples of which one ends in prose.  Prompts read as text (``rows_of``: the runtime's
plain rendering), judged by ``add_main_findings``."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from harness_repo.repo import SEEDS_DIR
from test_worked_example import QUESTIONS, digest_of, rows_of

MODE = "main:example_format"
NAME = "example_format"
SEED_SYSTEM = (SEEDS_DIR / "math" / "prompts" / "system.j2").read_text()
SEED_USER = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
PROSE = SEED_SYSTEM.replace("125 + 250 = 375\nAnswer: 375", "125 + 250 = 375, so the result is 375.")
EQUALS_SHOT = ("Q: What is 6 * 7?\nA: 6 * 7 = 42\n\nQ: What is 90 - 45?\nA: 90 - 45 = 45\n\n{{ question }}\n\n"
               "End with the line \"Answer: <number>\".")
ANSWER_IS = ("Solve the task and give the result on a final line \"Answer: <number>\".\n\nExample:\n"
             "Question: What is 19 + 23?\nReply:\n19 + 23 = 42\nThe answer is 42.\n")
TWO_SHOTS = ("Show one line of working, then a final line \"Answer: <number>\".\n\nExample 1:\nQuestion: What is 7 * 8?"
             "\nReply:\n7 * 8 = 56\nAnswer: 56\n\nExample 2:\nQuestion: What is 90 - 36?\nReply:\n"
             "Taking 36 from 90 leaves 54.\n")
PLANTED = {  # variant -> (system, user, the unread reply line)
    "prose": (PROSE, SEED_USER, "125 + 250 = 375, so the result is 375."),
    "equals-shot": (SEED_SYSTEM, EQUALS_SHOT, "A: 6 * 7 = 42"),
    "answer-is": (ANSWER_IS, SEED_USER, "The answer is 42."),
    "two-shots": (TWO_SHOTS, SEED_USER, "Taking 36 from 90 leaves 54."),
}


@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_attack_an_example_ending_off_the_verifiers_line_is_named(variant: str) -> None:
    """Was a strict xfail at f0704d9 (no mode named the example); named now, with the example's own value."""
    system, user, line = PLANTED[variant]
    modes = digest_of(rows_of(system, user, QUESTIONS))["failure_modes"]
    assert any(line in json.dumps(m) for m in modes if str(m["name"]).startswith("main:")), modes
    [found] = [m for m in modes if m["name"] == MODE]
    assert (found["severity"], found["rate"], len(found["examples"])) == ("error", 1.0, 3), found
    assert [w["line"] for w in found["evidence"]["found"]] == [line] + (["A: 90 - 45 = 45"] if variant ==
                                                                         "equals-shot" else []), found["evidence"]
    assert found["evidence"]["found"][0]["value"] == VALUES[variant]


VALUES = {"prose": "375", "equals-shot": "42", "answer-is": "42", "two-shots": "54"}
ENDED = {  # variant -> the template the recipe writes and its path
    "prose": ("prompts/system.j2", PROSE.replace("is 375.", "is 375.\nAnswer: 375")),
    "equals-shot": ("prompts/user.j2", EQUALS_SHOT.replace("= 42\n", "= 42\nAnswer: 42\n").replace(
        "= 45\n", "= 45\nAnswer: 45\n")),
    "answer-is": ("prompts/system.j2", ANSWER_IS.replace("is 42.\n", "is 42.\nAnswer: 42\n")),
    "two-shots": ("prompts/system.j2", TWO_SHOTS.replace("54.\n", "54.\nAnswer: 54\n")),
}


def _files(system: str, user: str):
    from meta_agent.agents.recipes import HarnessFiles
    seed = SEEDS_DIR / "math"
    return HarnessFiles((seed / "harness.yaml").read_text(), (seed / "reward.py").read_text(), user,
                        system_prompt=system)


@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_the_recipe_ends_each_example_on_the_verifiers_line_with_its_own_value(variant: str) -> None:
    from meta_agent.agents.recipe_example import text_evidence
    from meta_agent.agents.recipe_example_format import example_format
    system, user, _ = PLANTED[variant]
    digest = digest_of(rows_of(system, user, QUESTIONS))
    change = example_format(digest, _files(system, user))
    path, text = ENDED[variant]
    assert change.files == {path: text}, change.files
    assert (change.rule, change.effects) == ("example-format", [
        "no_final_answer_rate decrease: the replies imitate an example ending on the verifier's line"])
    assert text_evidence(digest, change) == ""  # the check re-run on the branch's templates: exact evidence
    undone = dataclasses.replace(change, files={path: system if path == "prompts/system.j2" else user})
    assert PLANTED[variant][2] in text_evidence(digest, undone)
    again = digest_of(rows_of(*(text, user) if path == "prompts/system.j2" else (system, text), QUESTIONS))
    assert again["main_checks"][NAME]["passed"] and again["failure_modes"] == [], again["failure_modes"]


def test_the_seed_and_the_control_are_named_nothing() -> None:
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench")]
    from repair_flaws import control_files

    control = control_files()
    for system, user in ((SEED_SYSTEM, SEED_USER), (control["prompts/system.j2"], control["prompts/user.j2"])):
        digest = digest_of(rows_of(system, user, QUESTIONS))
        assert digest["main_checks"][NAME]["passed"] and digest["failure_modes"] == [], digest["failure_modes"]
        assert digest["main_checks"][NAME]["detail"].startswith("none of 3 rendered prompts")


def test_an_example_with_no_value_of_its_own_and_template_code_are_declined() -> None:
    from meta_agent.agents.recipe_example_format import example_format
    off = PROSE.replace("the result is 375.", "the result is 376.")  # its prose and its arithmetic disagree
    why = example_format(digest_of(rows_of(off, SEED_USER, QUESTIONS)), _files(off, SEED_USER))
    assert isinstance(why, str) and "376 is not its arithmetic's result 375" in why, why
    coded = PROSE.replace("so the result is 375.", "so the result is {{ 375 }}.")  # template code writes it
    why = example_format(digest_of(rows_of(PROSE, SEED_USER, QUESTIONS)), _files(coded, SEED_USER))
    assert isinstance(why, str) and "template code writes it" in why, why
    assert example_format(digest_of(rows_of(SEED_SYSTEM, SEED_USER, QUESTIONS)),
                          _files(SEED_SYSTEM, SEED_USER)).startswith(f"no {MODE} finding")


@pytest.mark.docker
def test_rendered_in_the_sandbox_named_and_the_branch_renders_clean(docker_sandbox, tmp_path: Path) -> None:
    """The 12j-like prose example planted in main's system template, rendered by the real runtime over real tasks:
    named; the recipe agent's branch, rendered again, passes the check and keeps the rest of the prompt."""
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe import RecipeAgent
    from harness_repo.repo import HarnessRepo
    from test_worked_example import render_rows

    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": PROSE}, "an example")
    digest = digest_of(render_rows(docker_sandbox, repo, "main", tmp_path))
    assert [m["name"] for m in digest["failure_modes"]] == [MODE], digest["failure_modes"]
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert (proposal.branch, proposal.files_changed) == ("iv/r0-example-format", ["prompts/system.j2"]), proposal
    assert repo.read_file(proposal.branch, "prompts/system.j2") == ENDED["prose"][1]
    again = digest_of(render_rows(docker_sandbox, repo, proposal.branch, tmp_path))
    assert again["main_checks"][NAME]["passed"] and again["failure_modes"] == [], again["failure_modes"]


@pytest.mark.docker
def test_gate_merges_example_format_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """The recipe's branch on a seed harness whose example ends in prose, judged by the real gate over the synthetic
    world's archive: the prompts render, fit and leak nothing, the predicted benefit is live: merged on probation."""
    from test_a1_gate import _judged, _merged_on_probation

    from meta_agent.agents.recipe_example_format import example_format
    mode = digest_of(rows_of(PROSE, SEED_USER, QUESTIONS))["failure_modes"][0]
    _merged_on_probation(_judged(docker_sandbox, tmp_path, example_format, {"prompts/system.j2": PROSE}, mode,
                                 "prompts/system.j2"))


def test_the_search_agent_proposes_the_edit_on_the_check_re_run(tmp_path: Path) -> None:
    """The search agent's evidence for the edit is the check re-run on the branch's templates (exact), not a
    generation preview of four tasks."""
    from harness_repo.repo import HarnessRepo
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.search import SearchAgent

    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": PROSE}, "an example")
    ctx = AgentContext(round=0, digest=digest_of(rows_of(PROSE, SEED_USER, QUESTIONS)), digest_markdown="",
                       history=[], skills=[], repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0",
                       max_candidates=1)
    [proposal] = SearchAgent().propose(ctx)
    assert proposal.branch == "iv/r0-example-format" and proposal.files_changed == ["prompts/system.j2"], proposal


def test_other_shapes_of_example_are_read_and_ended_on_their_own_value() -> None:
    """An ``Input:``/``Output:`` shot, a heading with an apostrophe, a fraction the prose ends on, and an unread
    ``Answer:`` line in words (rewritten, not followed): each ended on its own value, and the text re-reads clean."""
    from meta_agent.agents.recipe_example_format import ended
    from meta_agent.example_format import unread_examples

    text = ("Give a final line \"Answer: <number>\".\n\nInput: What is 6 * 7?\nOutput: 6 * 7 = 42\n\n"
            "Here's a worked example:\n  Three quarters: 3 / 4 gives 3/4.\n\n"
            "Example:\nQuestion: What is 125 + 250?\nReply:\n125 + 250 = 375\nAnswer: three hundred seventy-five\n")
    assert [(w["line"], w["value"]) for w in unread_examples(text)] == [
        ("Output: 6 * 7 = 42", "42"), ("Three quarters: 3 / 4 gives 3/4.", "0.75"),
        ("Answer: three hundred seventy-five", "375")]
    new, values = ended(text)
    assert values == ["42", "0.75", "375"] and unread_examples(new) == []
    assert new == text.replace("= 42\n", "= 42\nAnswer: 42\n").replace("3/4.\n", "3/4.\n  Answer: 0.75\n").replace(
        "Answer: three hundred seventy-five", "Answer: 375")


def test_the_benchmarks_in_sample_prompts_are_named_nothing() -> None:
    """Every prompt of ``bench/repair_flaws.py``'s flaws and the control's read: none shows an example that ends
    off the line (their prompt flaw drops the instruction; the held-out sets' ``#### 375`` and words examples are
    named, see the report)."""
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench")]
    from repair_flaws import BUILT_IN, FLAWS, control_files

    from meta_agent.example_format import unread_examples

    base = control_files()
    prompts = {(name, path): text for name in BUILT_IN for path, text in FLAWS[name].apply(dict(base)).items()
               if path.startswith("prompts/")}
    prompts |= {("control", path): text for path, text in base.items() if path.startswith("prompts/")}
    assert len(prompts) == 4, prompts
    assert {key: unread_examples(text) for key, text in prompts.items()} == {key: [] for key in prompts}

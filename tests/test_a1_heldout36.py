"""Held-out cases for main:answer_cue and answer-cue, written after the code froze (session 36, a1): variants the
check and the recipe were not designed for.  Where the attack still wins the test stays a strict xfail with the
reason.  Rendering is the real sandboxed runtime over real tasks (``test_worked_example.render_rows``); the replies are
the ones a base model writes under each prompt, judged by the real math verifier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.digest_rows import json_obj
from test_worked_example import digest_of, render_rows

TASKS = 8
SEED_SYSTEM_BOLD = "You are a careful math assistant. Work it out, then give only the final number in bold.\n"
HELD_OUT = {  # name -> (system template or None for the seed's, user template, how the replies end)
    "hash-marks": (None, "{{ question }}\n\nWrite your final answer after '####'.", "#### {v}"),
    "cue-by-code": (None, '{{ question }}\n{{ "Answer:" }}', " {v}\n\nQuestion: What is 2 + 2?"),
    "french-cue": (None, "{{ question }}\nRéponse :", " {v}"),
    "bold-in-system": (SEED_SYSTEM_BOLD, "{{ question }}", "Adding up.\n**{v}**"),
    "placeholder-line": (None, "{{ question }}\nAnswer: <number>", "{v}"),
    "cut-working": (None, None, "Let me add: 3 + 4 = "),
}


def _answered(rows: list[dict], ending: str) -> list[dict]:
    domain = MathDomain()
    for k, row in enumerate(rows):
        truth = json_obj(row["ground_truth"])
        gold = str(truth["answer"])
        value = gold if k % 2 == 0 else gold + "1"
        text = ending.format(v=value)
        score, info = domain.verify(row["data_source"], text, truth)
        messages = json_obj(row["messages"])
        row.update(response=text, verified=score, reward=score, verifier_info=json.dumps(info),
                   messages=json.dumps(messages[:-1] + [{"role": "assistant", "content": text}]))
    return rows


@pytest.fixture(scope="module")
def judged(docker_sandbox, tmp_path_factory) -> dict[str, tuple[HarnessRepo, list[dict], dict]]:
    tmp = tmp_path_factory.mktemp("heldout36")
    out = {}
    for name, (system, user, ending) in HELD_OUT.items():
        repo = HarnessRepo.create(tmp / name / "harness", "math")
        planted = {k: v for k, v in (("prompts/system.j2", system), ("prompts/user.j2", user)) if v is not None}
        if planted:
            repo.commit_files(planted, "the prompts")
        rows = _answered(render_rows(docker_sandbox, repo, "main", tmp / name, TASKS), ending)
        assert len(rows) == TASKS and all(json_obj(r["verifier_info"])["reason"] == "no final answer" for r in rows)
        out[name] = (repo, rows, digest_of(rows))
    return out


def _repaired(docker_sandbox, repo: HarnessRepo, digest: dict, tmp: Path) -> list[str]:
    """answer-cue's branch, its prompts rendered again: each prompt's last non-empty line."""
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe import RecipeAgent

    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt", round_dir=tmp / "r0", max_candidates=3)
    [proposal] = [p for p in RecipeAgent().propose(ctx) if "answer-cue" in p.branch]
    again = render_rows(docker_sandbox, repo, proposal.branch, tmp, 4)
    assert len(again) == 4
    return [[line.strip() for line in r["prompt"].splitlines() if line.strip()][-1] for r in again]


def _named(digest: dict) -> bool:
    return not digest["main_checks"]["answer_cue"]["passed"]


def test_a_cue_in_another_language_is_named_and_repaired(judged, docker_sandbox, tmp_path: Path) -> None:
    repo, _, digest = judged["french-cue"]
    assert _named(digest), digest["main_checks"]["answer_cue"]
    lasts = _repaired(docker_sandbox, repo, digest, tmp_path)
    assert all(last.startswith('End your reply with the line "Answer: <number>"') for last in lasts), lasts


def test_a_bold_request_in_the_system_prompt_is_named_and_repaired(judged, docker_sandbox, tmp_path: Path) -> None:
    repo, _, digest = judged["bold-in-system"]
    assert _named(digest), digest["main_checks"]["answer_cue"]
    lasts = _repaired(docker_sandbox, repo, digest, tmp_path)
    assert all(last.startswith('End your reply with the line "Answer: <number>"') for last in lasts), lasts


def test_replies_cut_in_their_working_under_the_seed_are_not_named(judged) -> None:
    _, _, digest = judged["cut-working"]
    assert not _named(digest), digest["main_checks"]["answer_cue"]


def test_an_answer_after_hash_marks_is_named(judged) -> None:
    """Closed in session 37: a value alone on its line after a marker (``#### 7``) is a form, as a wrapping is."""
    _, _, digest = judged["hash-marks"]
    assert _named(digest), digest["main_checks"]["answer_cue"]


def test_a_cue_written_by_template_code_is_named_and_repaired(judged, docker_sandbox, tmp_path: Path) -> None:
    """Closed in session 37: a string literal the last line prints ({{ "Answer:" }}) counts as the line's text."""
    repo, _, digest = judged["cue-by-code"]
    assert _named(digest), digest["main_checks"]["answer_cue"]
    lasts = _repaired(docker_sandbox, repo, digest, tmp_path)
    assert all(last.startswith('End your reply with the line "Answer: <number>"') for last in lasts), lasts


def test_a_format_line_left_as_the_prompts_last_line_is_named(judged, docker_sandbox, tmp_path: Path) -> None:
    """Closed in session 37: a last line that is only a label and its placeholder is a cue to fill in; the recipe
    removes it and asks for the line last."""
    repo, _, digest = judged["placeholder-line"]
    assert _named(digest), digest["main_checks"]["answer_cue"]
    lasts = _repaired(docker_sandbox, repo, digest, tmp_path)
    assert all(last.startswith('End your reply with the line "Answer: <number>"') for last in lasts), lasts

"""Prompts that leave the answer's format to a cue (issue 44, held-out set 12h's answer-cue-prompt, generalised).

Flaws of our own planted in main's user template, unlike 12h's ``Question: ...\\nAnswer:``: a ``Final answer:`` cue,
a few-shot block whose shots end bare on ``A:``, a template ending ``The answer is``, and an ``Answer:`` line that asks
for the number in bold.  Each is rendered by main's templates in the real sandboxed runtime over real domain tasks;
the replies are the ones a base model writes under such a prompt (it continues the cue with the value, or writes the
value in bold), judged by the real math verifier, and archived as training archives them.  The digest names
``main:answer_cue`` from the replies (most carry no final answer) together with where the format sits in the
rendered prompt; the recipe removes the cue and asks, last, for the line the verifier reads, and the branch's prompts,
rendered again, end on that instruction and still hold the question.  The seed's prompts with the same share of
untagged replies are not named: the cause is the policy's, not the prompt's.  Real git, real Docker; no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.digest_rows import json_obj
from test_worked_example import digest_of, render_rows

TASKS = 8
SHOTS = "Q: What is 2 + 3?\nA: 5\n\nQ: What is 6 - 4?\nA: 2\n\n"
VARIANTS = {
    "final-answer-cue": ("{{ question }}\n\nFinal answer:", "cue"),
    "bare-shots": (SHOTS + "Q: {{ question }}\nA:", "cue"),
    "answer-is": ("{{ question }}\nLet's think. The answer is", "cue"),
    "bold": ("{{ question }}\n\nAnswer: give just the number in bold, like **12**.", "bold"),
}
"""The planted user templates (the seed's system prompt, which asks for the Answer: line, stays) and how a base
model replies under each."""


def reply(kind: str, gold: str, right: bool) -> str:
    value = gold if right else str(int(float(gold)) + 1) if gold.lstrip("-").isdigit() else gold + "1"
    if kind == "cue":  # a base model continues the cue with the value, then goes on with another question
        return f" {value}\n\nQ: What is 9 + 1?\nA: 10"
    if kind == "bold":
        return f"Adding it up step by step.\n**{value}**"
    return f"Working: the result is {value}"  # the seed's untrained policy: working, no final line


def answered(rows: list[dict], kind: str) -> list[dict]:
    """``rows`` with the replies a base model gives under ``kind`` (every other one right), judged by the verifier."""
    domain = MathDomain()
    for k, row in enumerate(rows):
        gold = str(json_obj(row["ground_truth"])["answer"])
        text = reply(kind, gold, k % 2 == 0)
        score, info = domain.verify(row["data_source"], text, json_obj(row["ground_truth"]))
        messages = json_obj(row["messages"])
        row.update(response=text, verified=score, reward=score, verifier_info=json.dumps(info),
                   messages=json.dumps(messages[:-1] + [{"role": "assistant", "content": text}]))
    return rows


@pytest.fixture(scope="module")
def planted(docker_sandbox, tmp_path_factory) -> dict[str, tuple[HarnessRepo, list[dict], dict]]:
    tmp = tmp_path_factory.mktemp("cue")
    out = {}
    for name, (user, kind) in {**VARIANTS, "seed": (None, "seed")}.items():
        repo = HarnessRepo.create(tmp / name / "harness", "math")
        if user is not None:
            repo.commit_files({"prompts/user.j2": user}, "the user prompt")
        rows = answered(render_rows(docker_sandbox, repo, "main", tmp / name, TASKS), kind)
        out[name] = (repo, rows, digest_of(rows))
    return out


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_prompt_that_leaves_the_format_to_a_cue_is_named(planted, name: str) -> None:
    _, rows, digest = planted[name]
    assert len(rows) == TASKS and all(json_obj(r["verifier_info"])["reason"] == "no final answer" for r in rows)
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:answer_cue"]
    assert found["rate"] == 1.0 and found["severity"] == "error", found
    ev = found["evidence"]
    assert ev["rows"] == TASKS and ev["missing"] == 1.0 and ev["right_unread"] == pytest.approx(0.5), ev
    assert ev["cause"] == ("answer_form" if name == "bold" else "trailing_cue"), ev
    assert ev["cue"] == {"final-answer-cue": "Final answer:", "bare-shots": "A:", "answer-is": "The answer is",
                         "bold": None}[name], ev
    assert ev.get("form") == ("**" if name == "bold" else None), ev
    assert found["examples"] and not digest["main_checks"]["answer_cue"]["passed"]


def test_the_seeds_prompts_with_untagged_replies_are_not_named(planted) -> None:
    """The seed asks for the line last, as an instruction: the replies that lack it are the policy's doing."""
    _, rows, digest = planted["seed"]
    assert all(json_obj(r["verifier_info"])["reason"] == "no final answer" for r in rows) and len(rows) == TASKS
    assert "main:answer_cue" not in {m["name"] for m in digest["failure_modes"]}, digest["failure_modes"]


REPAIRED_TAIL = 'End your reply with the line "Answer: <number>"'


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_recipe_removes_the_cue_and_asks_for_the_line_last(planted, docker_sandbox, name: str,
                                                               tmp_path: Path) -> None:
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe import RecipeAgent

    repo, _, digest = planted[name]
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=3)
    proposals = [p for p in RecipeAgent().propose(ctx) if "answer-cue" in p.branch]
    assert len(proposals) == 1, [p.branch for p in RecipeAgent().propose(ctx)]
    again = render_rows(docker_sandbox, repo, proposals[0].branch, tmp_path, 4)
    assert len(again) == 4
    for row in again:
        lines = [line.strip() for line in row["prompt"].splitlines() if line.strip()]
        assert lines[-1].startswith(REPAIRED_TAIL), lines[-3:]
        assert json_obj(row["task"])["question"] in row["prompt"], row["prompt"]
        assert not any(line.endswith(("Final answer:", "The answer is")) or line == "A:" for line in lines), lines
        if name == "bare-shots":  # the shots now show the line the verifier reads
            assert "Answer: 5" in lines and "Answer: 2" in lines and "A: 5" not in lines, lines
    assert digest_of(answered(again, "seed"))["main_checks"]["answer_cue"]["passed"]


def test_bold_replies_under_a_prompt_asking_for_the_line_last_are_not_named(planted) -> None:
    """The policy's own habit (bold), under the seed's instruction to end with the line: asking again is no repair."""
    _, rows, _ = planted["seed"]
    bolded = answered([dict(r) for r in rows], "bold")
    assert all(json_obj(r["verifier_info"])["reason"] == "no final answer" for r in bolded) and len(bolded) == TASKS
    check = digest_of(bolded)["main_checks"]["answer_cue"]
    assert check["passed"] and f"0 of {TASKS} replies" not in check["detail"], check

"""Does the question arrive whole?  Flaws of our own planted in main's user template (unlike held-out set 12g's
``truncate(60)``): a slice, the first sentence, the first line of a word-wrap, a ``replace`` that drops the minus
sign, an alias cut with ``truncate``, a template that never prints the question.  Each is rendered by main's
templates in the real sandboxed runtime over real domain tasks, archived as training archives them, and judged by
``add_main_findings``: the question cut from what the policy is asked is ``main:question_cut``, with its rate; the
recipe renders the question whole, and the branch's prompts, rendered again, hold every question.  Real git, real
Docker; no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.digest_rows import json_obj
from test_worked_example import digest_of, render_rows

TASKS = 8
"""Tasks rendered per planted template (``render_rows``'s default renders 4)."""
TAIL = '\n\nEnd with the line "Answer: <number>".\n'
VARIANTS = {
    "slice": "{{ question[:50] }}" + TAIL,
    "first-sentence": "{{ question.split('.')[0] }}" + TAIL,
    "wrapped-first-line": "{{ (question | wordwrap(30)).split('\\n')[0] }}" + TAIL,
    "minus-dropped": "{{ question | replace(' - ', ' ') }}" + TAIL,
    "alias-truncated": "{% set q = question %}Task: {{ q | truncate(40) }}" + TAIL,
    "never-printed": "Solve the arithmetic problem." + TAIL,
}
"""The planted user templates (the seed's system prompt stays)."""
REPAIRED = {**dict.fromkeys(("slice", "first-sentence", "wrapped-first-line", "minus-dropped"),
                            "{{ question }}" + TAIL),
            "alias-truncated": "{% set q = question %}Task: {{ q }}" + TAIL,
            "never-printed": "{{ question }}\n\nSolve the arithmetic problem." + TAIL}
"""What the recipe makes of each: the cut undone, the rest of the template as it was."""
SEED_USER = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()


def expected_cut(name: str, question: str) -> bool:
    """Whether the planted template loses part of ``question`` (what each template does, in Python)."""
    return {"slice": len(question) > 50, "first-sentence": "." in question.rstrip(". "),
            "wrapped-first-line": len(question) > 30, "minus-dropped": " - " in question,
            "alias-truncated": len(question) > 45, "never-printed": True}[name]


@pytest.fixture(scope="module")
def planted(docker_sandbox, tmp_path_factory) -> dict[str, tuple[HarnessRepo, list[dict], dict]]:
    """Each variant committed on main of its own harness repo, its round rendered and judged, once for the module."""
    tmp = tmp_path_factory.mktemp("question")
    out = {}
    for name, user in VARIANTS.items():
        repo = HarnessRepo.create(tmp / name / "harness", "math")
        repo.commit_files({"prompts/user.j2": user}, "the user prompt")
        rows = render_rows(docker_sandbox, repo, "main", tmp / name, TASKS)
        out[name] = (repo, rows, digest_of(rows))
    return out



@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_cut_question_is_named_with_its_rate(planted, name: str) -> None:
    _, rows, digest = planted[name]
    questions = [json_obj(r["task"])["question"] for r in rows]
    expected = sum(expected_cut(name, q) for q in questions) / len(rows)
    assert expected > 0, (name, questions)  # the draw holds a question this template cuts
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:question_cut"]
    assert found["rate"] == pytest.approx(expected), (found, questions)
    assert found["severity"] == ("error" if expected > 0.5 else "warning"), found
    assert found["examples"] and not digest["main_checks"]["question_cut"]["passed"]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_recipe_renders_the_question_whole(planted, docker_sandbox, name: str, tmp_path: Path) -> None:
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe import RecipeAgent

    repo, _, digest = planted[name]
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.files_changed == ["prompts/user.j2"], proposal
    user = repo.read_file(proposal.branch, "prompts/user.j2")
    assert user == REPAIRED[name], user
    again = render_rows(docker_sandbox, repo, proposal.branch, tmp_path, TASKS)
    assert len(again) == TASKS, again  # every rendered task, so the check below cannot pass on an empty list
    assert all(json_obj(r["task"])["question"] in r["prompt"] for r in again), [r["prompt"] for r in again]
    assert digest_of(again)["main_checks"]["question_cut"]["passed"]


def test_the_seed_and_a_lossless_filter_are_not_named(docker_sandbox, tmp_path: Path) -> None:
    """The seed's ``{{ question }}`` and a template that trims and upper-cases it (nothing of the task lost) pass;
    the check read every row (its detail counts them)."""
    for name, user in (("seed", SEED_USER), ("upper", "{{ question | trim | upper }}" + TAIL)):
        repo = HarnessRepo.create(tmp_path / name, "math")
        if name != "seed":
            repo.commit_files({"prompts/user.j2": user}, "the user prompt")
        digest = digest_of(render_rows(docker_sandbox, repo, "main", tmp_path / f"{name}-export", TASKS))
        assert [m["name"] for m in digest["failure_modes"]] == [], (name, digest["failure_modes"])
        assert digest["main_checks"]["question_cut"] == {
            "passed": True, "detail": f"all {TASKS} rendered prompts hold their task's question whole"}, name


def test_a_question_holding_its_own_answer_is_no_leak_of_the_template() -> None:
    """The gate's leak check compares a candidate's prompts with main's: a template that prints a question main cut
    shows the question's own numbers, which for ``7 - 0 =`` include its answer.  Given the questions, that is no new
    leak; a template that prints an answer the question does not hold still is one."""
    from meta_agent.prompt_checks import prompt_checks

    leaks = MathDomain().leaks_answer
    whole, cut = "State the final answer to the following arithmetic problem: 7 - 0 =", "State the final answer..."
    main = [[{"role": "user", "content": cut}], [{"role": "user", "content": "What is 3 + 4?"}]]
    candidate = [[{"role": "user", "content": whole}], [{"role": "user", "content": "What is 3 + 4? It is 7."}]]
    truths, questions = [{"answer": "7"}, {"answer": "7"}], [whole, "What is 3 + 4?"]
    [leak] = [c for c in prompt_checks(main, candidate, truths, leaks, 256, questions) if c["name"] == "prompt_leak"]
    assert not leak["passed"] and "(1 where main's prompt for the same task did not; 1 whose question itself holds " \
        "the answer not counted)" in leak["detail"], leak
    [alone] = [c for c in prompt_checks(main[:1], candidate[:1], truths[:1], leaks, 256, questions[:1])
               if c["name"] == "prompt_leak"]
    assert alone["passed"], alone
    [blind] = [c for c in prompt_checks(main[:1], candidate[:1], truths[:1], leaks, 256) if c["name"] == "prompt_leak"]
    assert not blind["passed"], blind  # without the questions, as the gate calls it today: blamed on the template


def test_a_question_past_the_read_cap_is_whole_behind_a_system_prompt_and_cut_when_its_end_is() -> None:
    """A problem statement longer than the read cap (SWE's can be), printed whole after a system prompt, is not
    named; the same statement with its last sentence dropped is (the cap reads the prompt further than the
    question)."""
    from meta_agent.question_checks import MAX_CHARS, lost

    statement = " ".join(f"line {k} of the issue;" for k in range(MAX_CHARS // 8))
    assert len(statement) > MAX_CHARS
    system = "You fix bugs in Python repositories. " * 50 + "\n"
    assert lost(statement, system + statement) == []
    head = statement[:MAX_CHARS // 2]
    assert lost(head + " and more", system + head)[:2] == ["and", "more"]

"""Worked examples in main's prompts checked by trusted arithmetic (issue 44): flaws of our own planted in main's
templates (a wrong product in the system prompt's example; an example whose Answer line disagrees with its own
working; a wrong sum in the user prompt's example), rendered by main's templates in the real sandboxed runtime over
real domain tasks, archived as training archives them, and judged by ``add_main_findings``.  A wrong example is a
``main:worked_example`` finding; the recipe corrects it from the evaluated expression, and the branch's prompts,
rendered again, are clean.  Real git, real Docker; no model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domains.math import MathDomain
from harness_repo.contract import HarnessConfig
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings
from meta_agent.prompt_checks import template_item
from sandboxes.harness_client import HarnessSession
from trajectory.rows import trajectory_row

SEED_SYSTEM = (SEEDS_DIR / "math" / "prompts" / "system.j2").read_text()
WRONG_PRODUCT = ("You solve arithmetic carefully. Write your working on one line and finish with a line "
                 "\"Answer: <number>\".\n\nWorked example:\nQ: Multiply 14 by 12.\nWorking:\n14 * 12 = 158\n"
                 "Answer: 158\n")
TASKS = 4


def render_rows(sandbox, repo: HarnessRepo, ref: str, tmp: Path, tasks: int = TASKS) -> list[dict]:
    """Training's archive rows for ``tasks`` real tasks, their prompts rendered by ``ref``'s templates in the sandbox
    (the call training makes), each with its task's question as the trainer records it."""
    config = HarnessConfig.model_validate(yaml.safe_load(repo.read_file(ref, "harness.yaml")))
    drawn = MathDomain().tasks("train", config.tasks, tasks, 0)
    with HarnessSession(sandbox, repo.export(ref, tmp / ref.replace("/", "-"))) as session:
        rendered = session.render([template_item(t.question, t.template_vars()) for t in drawn])
    rows = []
    for k, (task, messages) in enumerate(zip(drawn, rendered)):
        assert not isinstance(messages, str), messages
        rows.append(trajectory_row(
            traj_id=f"t{k}", run_id="r", round=0, step=0, group_id=f"g{k}", sample_idx=0, domain="math",
            task_id=task.task_id, data_source=task.data_source, split="train",
            prompt="\n".join(m["content"] for m in messages), response="Answer: 1",
            messages=messages + [{"role": "assistant", "content": "Answer: 1"}], ground_truth=task.ground_truth,
            reward=0.0, verified=0.0, response_tokens=2, truncated=False, finish_reason="stop", kept=True,
            task={"question": task.question, "vars": task.template_vars()}))
    return rows


def digest_of(rows: list[dict]) -> dict:
    digest: dict = {"round": 0, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, rows, (0.0, 1.0))
    return digest


@pytest.fixture(scope="module")
def planted(docker_sandbox, tmp_path_factory) -> tuple[HarnessRepo, dict, Path]:
    """main with a wrong product in its system prompt's worked example, its round judged, once for the module."""
    tmp = tmp_path_factory.mktemp("worked")
    repo = HarnessRepo.create(tmp / "harness", "math")
    repo.commit_files({"prompts/system.j2": WRONG_PRODUCT}, "an example")
    return repo, digest_of(render_rows(docker_sandbox, repo, "main", tmp)), tmp


def test_a_wrong_product_in_mains_worked_example_is_named_with_its_evidence(planted) -> None:
    _, digest, _ = planted
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:worked_example"]
    assert found["severity"] == "error" and found["rate"] == 1.0, found  # every rendered prompt carries it
    wrong = {(w["role"], w["kind"], w["line"], w["stated"], w["computed"]) for w in found["evidence"]["found"]}
    assert wrong == {("system", "result", "14 * 12 = 158", "158", "168"),
                     ("system", "answer", "Answer: 158", "158", "168")}, wrong  # the Answer line follows it
    assert len(found["examples"]) == 3 and "14 * 12 = 158" in found["message"], found
    assert not digest["main_checks"]["worked_example"]["passed"]


def test_the_recipe_corrects_the_example_and_the_branch_renders_clean(planted, docker_sandbox) -> None:
    repo, digest, tmp = planted
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt", round_dir=tmp / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.files_changed == ["prompts/system.j2"], proposal
    system = repo.read_file(proposal.branch, "prompts/system.j2")
    assert "14 * 12 = 168\nAnswer: 168\n" in system and "158" not in system, system
    assert system.replace("168", "158") == WRONG_PRODUCT  # nothing else of the prompt moved
    again = digest_of(render_rows(docker_sandbox, repo, proposal.branch, tmp))
    assert again["main_checks"]["worked_example"]["passed"], again["main_checks"]


def test_the_seed_prompts_are_not_named(docker_sandbox, tmp_path: Path) -> None:
    """The seed's example is right, and its user prompt's question (``6 + 2 =``) states no result: nothing."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    digest = digest_of(render_rows(docker_sandbox, repo, "main", tmp_path))
    assert [m["name"] for m in digest["failure_modes"]] == []
    assert digest["main_checks"].get("worked_example", {"passed": True})["passed"]


def rows_of(system: str, user: str, questions: list[str]) -> list[dict]:
    """Rows whose prompts are ``system`` and ``user`` with ``{{ question }}`` filled in, as the runtime renders
    plain text (no template logic in these prompts)."""
    rows = []
    for k, q in enumerate(questions):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user.replace(
            "{{ question }}", q)}]
        rows.append(trajectory_row(
            traj_id=f"u{k}", run_id="r", round=0, step=0, group_id=f"g{k}", sample_idx=0, domain="math",
            task_id=f"t{k}", data_source="reasoning_gym/chain_sum", split="train",
            prompt="\n".join(m["content"] for m in messages), response="Answer: 1",
            messages=messages + [{"role": "assistant", "content": "Answer: 1"}], ground_truth={"answer": "1"},
            reward=0.0, verified=0.0, response_tokens=2, truncated=False, finish_reason="stop", kept=True,
            task={"question": q, "vars": {}}))
    return rows


DISAGREES = ("Solve the problem. Show the subtraction, then write \"Answer: <number>\" on its own line.\n\n"
             "For instance:\nProblem: 36 - 19\nSolution:\n36 - 19 = 17\nAnswer: 27\n")
USER_SUM = ("{{ question }}\n\nLike this: 8 + 7 + 6 = 22, so the line is \"Answer: 22\". "
            "End with \"Answer: <number>\".\n")
QUESTIONS = ["State the final answer to the following arithmetic problem: 4 + 5 =",
             "If x + 3 = 10, what is x?", "Solve the following multiplication: 3 * 4. Give only the result."]


def test_an_answer_line_against_its_working_and_a_wrong_sum_in_the_user_prompt_are_named() -> None:
    digest = digest_of(rows_of(DISAGREES, USER_SUM, QUESTIONS))
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:worked_example"]
    wrong = {(w["role"], w["kind"], w["stated"], w["computed"]) for w in found["evidence"]["found"]}
    assert wrong == {("system", "answer", "27", "17"), ("user", "result", "22", "21"),
                     ("user", "answer", "22", "21")}, wrong
    assert found["rate"] == 1.0


def test_a_question_stating_an_equation_is_no_worked_example() -> None:
    """``x + 3 = 10`` has a variable, the question's own ``4 + 5 =`` states nothing: the seed's prompts with these
    questions name nothing (the arithmetic is never blamed on the task)."""
    user = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
    digest = digest_of(rows_of(SEED_SYSTEM, user, QUESTIONS + ["Given 2 + 2 = 5 in this puzzle, what is 3 + 3?"]))
    assert digest["failure_modes"] == [], digest["failure_modes"]


def _found(system: str) -> dict:
    """The digest of a round whose rendered system prompt is ``system`` (the seed's user prompt)."""
    user = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
    return digest_of(rows_of(system, user, QUESTIONS[:2]))


def _files(system: str):
    from meta_agent.agents.recipes import HarnessFiles
    seed = SEEDS_DIR / "math"
    return HarnessFiles((seed / "harness.yaml").read_text(), (seed / "reward.py").read_text(),
                        (seed / "prompts" / "user.j2").read_text(), system_prompt=system)


def test_a_value_with_no_finite_decimal_is_dropped_with_its_paragraph_and_template_code_is_declined() -> None:
    from meta_agent.agents.recipe_example import worked_example
    thirds = "Reply with \"Answer: <number>\".\n\nExample:\n10 / 4 = 2.5, 10 / 3 = 3.4\nAnswer: 3.4\n\nBe brief.\n"
    change = worked_example(_found(thirds), _files(thirds))
    assert change.key == "worked-example:drop:3.4->10/3", change
    assert change.files == {"prompts/system.j2": "Reply with \"Answer: <number>\".\n\nBe brief.\n"}, change.files
    assert change.effects == ["verified_mean increase: the example the policy imitates computes its result right"]
    # the rendered prompt shows 2 + 2 = 5, the template's text only template code: nothing to edit as text
    computed = "Reply with \"Answer: <number>\".\n\nExample:\n2 + 2 = {{ 2 + 3 }}\n"
    why = worked_example(_found(computed.replace("{{ 2 + 3 }}", "5")), _files(computed))
    assert isinstance(why, str) and "template code computes it" in why, why
    assert worked_example(_found(SEED_SYSTEM), _files(SEED_SYSTEM)).startswith("no main:worked_example finding")


def test_the_search_agent_proposes_the_correction_on_the_check_re_run(tmp_path: Path) -> None:
    from meta_agent.agents.search import SearchAgent
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": WRONG_PRODUCT}, "an example")
    ctx = AgentContext(round=0, digest=_found(WRONG_PRODUCT), digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=1)
    assert [p.branch for p in SearchAgent().propose(ctx)] == ["iv/r0-worked-example"]


def test_the_check_re_run_on_a_branchs_templates_is_its_evidence() -> None:
    """What the search agent could take instead of a generation preview (``recipe_example.text_evidence``): the
    recipe's own change passes, the same change with the wrong line put back does not, another rule's is not
    judged."""
    from dataclasses import replace

    from meta_agent.agents.recipe_example import text_evidence, worked_example
    digest = _found(WRONG_PRODUCT)
    change = worked_example(digest, _files(WRONG_PRODUCT))
    assert text_evidence(digest, change) == ""
    undone = replace(change, files={"prompts/system.j2": WRONG_PRODUCT})
    assert "14 * 12 = 158" in text_evidence(digest, undone)
    assert text_evidence(digest, replace(change, rule="final-answer-prompt")) is None


@pytest.mark.docker
def test_gate_merges_worked_example_and_answer_last_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """Both prompt recipes' branches judged by the real gate on a synthetic archive (``test_recipe_agent``'s world):
    the prompts render, fit and leak nothing, and the predicted benefit is live, so each merges on probation."""
    from test_recipe_agent import SETTINGS, World, gate_view, propose

    from meta_agent.agents.recipe_example import answer_last, worked_example
    from meta_agent.backtest import backtest_branch
    user = "{{ question }}\n\nStart with the line \"Answer: <number>\", then show how you got it.\n"
    # any number a prompt shows that is a fresh probe task's gold is a leak to the gate (probe_leak: 12 and 14 are
    # products of one-digit numbers): the example's numbers here lie beyond every task's answer
    system = WRONG_PRODUCT.replace("14 by 12", "123 by 47").replace("14 * 12", "123 * 47").replace("158", "5771")
    world = World(tmp_path / "world")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": system, "prompts/user.j2": user}, "the starting prompts")
    named = digest_of(rows_of(system, user, QUESTIONS))["failure_modes"]
    assert sorted(m["name"] for m in named) == ["main:answer_first", "main:worked_example"], named
    digest = dict(world.digests["unanswered"], failure_modes=named)
    # both predict verified_mean, so one round proposes one of them (the other is deferred): a round each
    proposals = [p for rule in (worked_example, answer_last) for p in propose(repo, digest, rules=(rule,))]
    assert [p.branch for p in proposals] == ["iv/r0-worked-example", "iv/r0-answer-last"], proposals
    for p in proposals:
        outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, tmp_path / "backtests",
                                  settings=SETTINGS, run_id="unanswered")
        assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
        assert gate_view(outcome)[1] == {"verified_mean increase": "live"}
        checks = {c["name"]: c["passed"] for c in outcome.report["gate"]["checks"]}
        assert checks["prompt_render"] and checks["prompt_length"] and checks["prompt_leak"], checks

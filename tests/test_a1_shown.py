"""Prompts that show answers the task mix produces (issue 44, session 37, a1): flaws of our own planted in main's
templates, unlike held-out set 12i's two system-prompt examples: a worked example kept in a Jinja variable, an
example asked in words and worked in digits, and a few-shot block in the user template whose shot answers a
decimal the mix (decimal_chain_sum) produces.  A policy that copies an example's answer is paid whenever the gold
is that value.  Rendered by main's templates in the real sandboxed runtime over real tasks, judged by
``add_main_findings`` with the trusted task generator; the recipe's branch is rendered again.  Real git, real
Docker; no model."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.main_checks import add_main_findings
from test_worked_example import render_rows, rows_of

MODE = "main:shown_answer"
SYSTEM = ('You are a careful math assistant. Work it out in one line, then give the result on a final line of the '
          'form "Answer: <number>".\n'
          '{% set shown = "Question: What is 9 - 4?\\nReply:\\n9 - 4 = 5\\nAnswer: 5" %}\n\n'
          'Example:\n{{ shown }}\n\n'
          'Another example:\nQuestion: What is two times four?\nReply:\n2 * 4 = 8\nAnswer: 8\n')
USER = ('Q: What is 1.5 + 2?\nA: 1.5 + 2 = 3.5\nAnswer: 3.5\n\n{{ question }}\n\nEnd with the line '
        '"Answer: <number>".')
MIX = [{"name": "chain_sum", "weight": 1.0, "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1,
                                                        "max_digits": 1}},
       {"name": "products", "weight": 1.0, "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1,
                                                       "max_digits": 1}},
       {"name": "decimal_chain_sum", "weight": 1.0, "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1,
                                                                "max_digits": 1, "min_decimal_places": 1,
                                                                "max_decimal_places": 1}}]
TASKS = 6


def judged(rows: list[dict], mix: list[dict]) -> dict:
    """The round's digest with main judged as the digest phase judges it: its mix and the exam's given."""
    domain = MathDomain()
    digest: dict = {"round": 0, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=mix, exam_specs=domain.eval_specs, domain=domain)
    return digest


def named(digest: dict) -> dict:
    [found] = [m for m in digest["failure_modes"] if m["name"] == MODE]
    return found


@pytest.fixture(scope="module")
def planted(docker_sandbox, tmp_path_factory) -> tuple[HarnessRepo, dict, Path]:
    tmp = tmp_path_factory.mktemp("shown")
    repo = HarnessRepo.create(tmp / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = MIX
    repo.commit_files({"prompts/system.j2": SYSTEM, "prompts/user.j2": USER, "harness.yaml": yaml.safe_dump(config)},
                      "examples and a decimal task")
    return repo, judged(render_rows(docker_sandbox, repo, "main", tmp, TASKS), MIX), tmp


def test_shown_answers_among_the_golds_are_named_with_their_mass(planted) -> None:
    _, digest, _ = planted
    found = named(digest)
    shown = {s["value"] for s in found["evidence"]["shown"]}
    assert shown == {"5", "8", "3.5"}, found["evidence"]
    assert 0 < found["rate"] < 0.5 and found["rate"] == found["evidence"]["mass"], found
    assert found["evidence"]["drawn"] >= 256 and found["evidence"]["bound"] > 81, found["evidence"]
    assert {s["role"] for s in found["evidence"]["shown"]} == {"system", "user"}
    assert not digest["main_checks"]["shown_answer"]["passed"]


def test_the_recipe_moves_each_example_out_of_the_golds_and_keeps_its_arithmetic(planted, docker_sandbox) -> None:
    repo, digest, tmp = planted
    bound = named(digest)["evidence"]["bound"]
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt", round_dir=tmp / "r0", max_candidates=1)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.files_changed == ["prompts/system.j2", "prompts/user.j2"], proposal
    again = judged(render_rows(docker_sandbox, repo, proposal.branch, tmp, TASKS), MIX)
    assert again["main_checks"]["shown_answer"]["passed"], again["main_checks"]["shown_answer"]
    assert again["main_checks"]["worked_example"]["passed"], again["main_checks"]["worked_example"]
    system = repo.read_file(proposal.branch, "prompts/system.j2")
    user = repo.read_file(proposal.branch, "prompts/user.j2")
    assert "{{ question }}" in user and user.endswith('End with the line "Answer: <number>".'), user
    assert "{% set shown" in system and "two times four" not in system, system  # the words follow the digits
    answers = [float(v) for v in re.findall(r"Answer: (-?[\d.]+)", system + user)]
    assert len(answers) == 3 and min(abs(a) for a in answers) > bound, answers  # beyond the measured support


def test_twelve_i_examples_are_named_and_the_seed_is_not() -> None:
    """The ninth held-out set's prompt (in-sample from here) over the seed's mix, and the seed's own prompt (its
    example answers 375, out of the golds' reach): one named, the other not."""
    user = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
    seed_mix = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())["tasks"]
    questions = ["What is 2 + 5?", "What is 3 * 3?", "What is 8 - 1?"]
    found = named(judged(rows_of(_twelve_i_system(), user, questions), seed_mix))
    assert {s["value"] for s in found["evidence"]["shown"]} == {"7", "42"}, found["evidence"]
    assert found["evidence"]["mass"] > 0.01
    seed = judged(rows_of((SEEDS_DIR / "math" / "prompts" / "system.j2").read_text(), user, questions), seed_mix)
    assert seed["main_checks"]["shown_answer"]["passed"], seed["main_checks"]["shown_answer"]


def _twelve_i_system() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ scripts import each other so
    from heldout_flaws_2026_12i import _SMALL_EXAMPLES

    return _SMALL_EXAMPLES


@pytest.mark.docker
def test_gate_merges_shown_answer_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """12i's examples on a seed harness, the finding's support measured by the trusted generator: the examples
    moved beyond it render, fit and leak nothing; the gate merges on probation."""
    from test_a1_gate import _judged, _merged_on_probation

    from meta_agent.agents.recipe_shown import shown_answer
    from meta_agent.example_checks import shown
    from meta_agent.example_shown import gold_values

    domain = MathDomain()
    seed_mix = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())["tasks"]
    golds = [g for g in gold_values(domain, seed_mix) + gold_values(domain, domain.eval_specs) if g is not None]
    mode = {"name": MODE, "source": "main_checks", "severity": "warning", "rate": 0.04, "message": "", "examples": [],
            "evidence": {"shown": [], "mass": 0.04, "drawn": 256, "bound": float(2 * max(abs(g) for g in golds)),
                         "support": sorted({shown(g) for g in golds})}}
    _merged_on_probation(_judged(docker_sandbox, tmp_path, shown_answer, {"prompts/system.j2": _twelve_i_system()},
                                 mode, "prompts/system.j2"))


def test_the_search_agent_proposes_the_same_edit_on_its_exact_evidence(planted) -> None:
    """The search agent offers the recipe's edit as it offers any generation edit; its evidence is the branch's
    templates re-read against the finding's measured support (a preview of four tasks could not see it), and the
    transcript names the mode it was judged for."""
    import json

    from meta_agent.agents.search import TRANSCRIPT, SearchAgent

    repo, digest, tmp = planted
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt-search", round_dir=tmp / "r0-search", max_candidates=1)
    [proposal] = SearchAgent().propose(ctx)
    assert "shown-answer" in proposal.branch and proposal.files_changed == ["prompts/system.j2", "prompts/user.j2"]
    [judged_] = [p for p in json.loads((tmp / "r0-search" / TRANSCRIPT).read_text())["recipe_previews"]
                 if p["key"].startswith("shown-answer:")]
    assert (judged_["mode"], judged_["proposed"], judged_["withheld"]) == (MODE, True, ""), judged_


INLINE = ('Work it out, then end with a line like "Answer: 12" (your own number).\n\n'
          'Question: How much is 9 - 3?\nReply:\nnine take away three leaves six, so 6.\n')


def test_an_answer_in_a_sentence_and_a_prose_final_line_are_named() -> None:
    user = (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text()
    seed_mix = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())["tasks"]
    found = named(judged(rows_of(INLINE, user, ["What is 2 + 5?", "What is 3 * 3?", "What is 8 - 1?"]), seed_mix))
    assert {(s["value"], s["kind"]) for s in found["evidence"]["shown"]} == {("12", "answer"), ("6", "final")}
    from meta_agent.agents.recipe_shown import shown_answer
    from meta_agent.agents.recipes import HarnessFiles

    config = (SEEDS_DIR / "math" / "harness.yaml").read_text()
    change = shown_answer({"failure_modes": [found]}, HarnessFiles(config, None, user, system_prompt=INLINE))
    system = change.files["prompts/system.j2"]
    assert "six" not in system and "end with a line like" in system, system  # the words follow; the request stays
    again = judged(rows_of(system, user, ["What is 2 + 5?"]), seed_mix)
    assert again["main_checks"]["shown_answer"]["passed"] and again["main_checks"]["worked_example"]["passed"]


def test_a_shown_value_drawn_once_is_no_candidate() -> None:
    """A rare gold meeting an example once in the draw (a wide mix's 375) is the draw's noise: named, not repaired."""
    from meta_agent.agents.recipe_shown import shown_answer
    from meta_agent.agents.recipes import HarnessFiles

    seed = {p: (SEEDS_DIR / "math" / p).read_text() for p in ("harness.yaml", "prompts/system.j2", "prompts/user.j2")}
    found = {"name": MODE, "severity": "warning", "rate": 1 / 256, "evidence": {
        "mass": 1 / 256, "drawn": 256, "bound": 20000.0, "support": ["375", "7"], "shown": []}}
    files = HarnessFiles(seed["harness.yaml"], None, seed["prompts/user.j2"], system_prompt=seed["prompts/system.j2"])
    assert "within the draw's noise" in shown_answer({"failure_modes": [found]}, files)
    change = shown_answer({"failure_modes": [found | {"evidence": found["evidence"] | {"mass": 3 / 256}}]}, files)
    assert "12500 + 25000 = 37500\nAnswer: 37500" in change.files["prompts/system.j2"], change.files

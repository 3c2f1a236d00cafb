"""Held-out cases for the question check, the whole-question recipe and the mask repairs, written after the code froze
(session 35, a1): variants the fix was not designed for.  Where the attack still wins the test stays a strict xfail
with the reason.  Rendering is the real sandboxed runtime over real tasks (``test_a1_question.render_rows``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipe_mask import unmask_truncation
from meta_agent.agents.recipe_question import whole_question
from meta_agent.agents.recipes import HarnessFiles
from test_a1_question import TAIL, digest_of, render_rows

SEED = SEEDS_DIR / "math"
HELD_OUT = {
    "loop": "{% for w in question.split()[:6] %}{{ w }} {% endfor %}" + TAIL,
    "macro": "{% macro ask(q) %}{{ q | truncate(45) }}{% endmacro %}{{ ask(question) }}" + TAIL,
    "conditional": "{% if question | length < 70 %}{{ question }}{% else %}Solve the problem.{% endif %}" + TAIL,
    "reassigned": "{% set q = question %}{% set q = q[:30] %}{{ q }}" + TAIL,
    "times-word": "{{ question | replace('*', 'times') }}" + TAIL,
    "wrapped-whole": "{{ question | wordwrap(20, wrapstring=' ') }}" + TAIL,
}


@pytest.fixture(scope="module")
def judged(docker_sandbox, tmp_path_factory) -> dict[str, tuple[HarnessRepo, dict]]:
    tmp = tmp_path_factory.mktemp("heldout35")
    out = {}
    for name, user in HELD_OUT.items():
        repo = HarnessRepo.create(tmp / name / "harness", "math")
        repo.commit_files({"prompts/user.j2": user}, "the user prompt")
        out[name] = (repo, digest_of(render_rows(docker_sandbox, repo, "main", tmp / name)))
    return out


def _repaired(docker_sandbox, repo: HarnessRepo, digest: dict, tmp: Path) -> dict:
    """whole_question's change committed on a branch, its prompts rendered again and judged."""
    change = whole_question(digest, HarnessFiles.read(repo))
    assert not isinstance(change, str), change
    wt = repo.start_intervention(0, "whole-question", worktree_root=tmp / "wt")
    for rel, text in change.files.items():
        (Path(wt.path) / rel).write_text(text)
    repo.commit(wt, "whole", {})
    repo.remove_worktree(wt, force=True)
    return digest_of(render_rows(docker_sandbox, repo, wt.branch, tmp))


@pytest.mark.parametrize("name", ["macro", "reassigned"])
def test_a_cut_behind_a_macro_or_a_reassignment_is_named_and_repaired(judged, docker_sandbox, name: str,
                                                                     tmp_path: Path) -> None:
    repo, digest = judged[name]
    assert not digest["main_checks"]["question_cut"]["passed"], digest["main_checks"]["question_cut"]
    again = _repaired(docker_sandbox, repo, digest, tmp_path)
    assert again["main_checks"]["question_cut"]["passed"], again["main_checks"]["question_cut"]


def test_a_loop_over_the_questions_words_is_repaired(judged, docker_sandbox, tmp_path: Path) -> None:
    repo, digest = judged["loop"]
    assert not digest["main_checks"]["question_cut"]["passed"]
    assert _repaired(docker_sandbox, repo, digest, tmp_path)["main_checks"]["question_cut"]["passed"]


def test_a_condition_that_drops_long_questions_is_repaired(judged, docker_sandbox, tmp_path: Path) -> None:
    repo, digest = judged["conditional"]
    assert not digest["main_checks"]["question_cut"]["passed"]
    assert _repaired(docker_sandbox, repo, digest, tmp_path)["main_checks"]["question_cut"]["passed"]


def test_a_wrap_that_keeps_every_word_is_not_named(judged) -> None:
    _, digest = judged["wrapped-whole"]
    assert digest["main_checks"]["question_cut"]["passed"], digest["main_checks"]["question_cut"]


def test_an_operator_written_as_a_word_is_not_named(judged) -> None:
    _, digest = judged["times-word"]
    assert digest["main_checks"]["question_cut"]["passed"], digest["main_checks"]["question_cut"]


@pytest.mark.xfail(strict=True, reason="held out, wins: mask_truncated under a short budget in a round that cut "
                   "nothing (truncation_rate 0) names no mode and the mask has no measured cost: nothing unmasks it, "
                   "though the next rounds' longer answers will be cut and masked")
def test_a_mask_that_cut_nothing_yet_is_unmasked() -> None:
    config = yaml.safe_load((SEED / "harness.yaml").read_text())
    config["grpo"].update(mask_truncated=True, max_completion_length=24)
    files = HarnessFiles(yaml.safe_dump(config, sort_keys=False), (SEED / "reward.py").read_text(),
                         (SEED / "prompts" / "user.j2").read_text(), (SEED / "filters.py").read_text())
    digest = {"round": 0, "domain": "math", "failure_modes": [], "truncation_rate": 0.0, "evidence": {}}
    assert not isinstance(unmask_truncation(digest, files), str)

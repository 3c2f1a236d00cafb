"""Held-out cases for main:shown_answer and shown-answer, written after the code froze (session 37, a1): variants the
check and the recipe were not designed for.  Where the attack still wins the test stays a strict xfail with the
reason.  Each planted prompt is judged over the seed's mix by ``add_main_findings`` with the trusted generator; the
recipe's templates are re-judged the same way.  Plain-text prompts are filled in as the runtime renders them
(``test_worked_example.rows_of``); the one with template logic is rendered in the real sandboxed runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipe_shown import shown_answer
from meta_agent.agents.recipes import HarnessFiles
from test_a1_shown import MODE, judged
from test_worked_example import render_rows, rows_of

SEED = {p: (SEEDS_DIR / "math" / p).read_text() for p in ("harness.yaml", "prompts/system.j2", "prompts/user.j2")}
MIX = yaml.safe_load(SEED["harness.yaml"])["tasks"]
QUESTIONS = ["What is 2 + 5?", "What is 3 * 3?", "What is 8 - 1?"]
HEAD = 'You are a careful math assistant. End with a final line "Answer: <number>".\n\n'
HELD_OUT = {
    "negative": HEAD + "Example:\nQuestion: What is 2 - 9?\nReply:\n2 - 9 = -7\nAnswer: -7\n",
    "two-steps": HEAD + "Example:\nQuestion: What is 3 + 4 - 2?\nReply:\n3 + 4 = 7\n7 - 2 = 5\nAnswer: 5\n",
    "times-x": HEAD + "Example:\nQuestion: What is 6 x 7?\nReply:\n6 x 7 = 42\nAnswer: 42.0\n",
    "table": HEAD + "Worked examples:\n| question | reply |\n|---|---|\n| 3 + 4 | 7 |\n| 6 * 7 | 42 |\n",
}


def _named(system: str) -> tuple[dict, dict | None]:
    digest = judged(rows_of(system, SEED["prompts/user.j2"], QUESTIONS), MIX)
    found = [m for m in digest["failure_modes"] if m["name"] == MODE]
    return digest, found[0] if found else None


def _repaired(system: str, found: dict) -> dict:
    """The recipe's system template, re-judged: the digest's checks."""
    change = shown_answer({"failure_modes": [found]}, HarnessFiles(SEED["harness.yaml"], None,
                                                                   SEED["prompts/user.j2"], system_prompt=system))
    assert not isinstance(change, str), change
    return judged(rows_of(change.files["prompts/system.j2"], SEED["prompts/user.j2"], QUESTIONS), MIX)["main_checks"]


@pytest.mark.parametrize("name", [
    pytest.param("negative", marks=pytest.mark.xfail(strict=True, reason=(
        "held out, wins: -7 is named, but the draw of 256 met it once (about 0.75% of the seed mix's golds: 0-7, "
        "1-8, 2-9 of the differences), so shown-answer declines it as the draw's noise (MIN_HITS 2)"))),
    "two-steps", "times-x"])
def test_a_worked_example_variant_is_named_and_moved_with_its_arithmetic(name: str) -> None:
    _, found = _named(HELD_OUT[name])
    assert found is not None and found["rate"] > 0.01, found
    checks = _repaired(HELD_OUT[name], found)
    assert checks["shown_answer"]["passed"] and checks["worked_example"]["passed"], checks


@pytest.mark.xfail(strict=True, reason="held out, wins: a few-shot table's answer cells ('| 3 + 4 | 7 |') are no "
                                       "Answer: line, no '= v' and no final line below arithmetic: not named")
def test_a_few_shot_table_is_named() -> None:
    _, found = _named(HELD_OUT["table"])
    assert found is not None and {s["value"] for s in found["evidence"]["shown"]} == {"7", "42"}, found


LOOPED = (HEAD + "Examples:\n{% for a, b in [(3, 4), (6, 2)] %}Question: What is {{ a }} + {{ b }}?\nReply:\n"
          "{{ a }} + {{ b }} = {{ a + b }}\nAnswer: {{ a + b }}\n\n{% endfor %}")


@pytest.mark.xfail(strict=True, reason="held out, wins: named from the rendered prompts, but the examples are "
                                       "written by a template loop (no example text to move): the recipe declines")
def test_examples_written_by_a_template_loop_are_named_and_moved(docker_sandbox, tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/system.j2": LOOPED}, "looped examples")
    digest = judged(render_rows(docker_sandbox, repo, "main", tmp_path, 3), MIX)
    [found] = [m for m in digest["failure_modes"] if m["name"] == MODE]
    assert {s["value"] for s in found["evidence"]["shown"]} == {"7", "8"}, found["evidence"]
    change = shown_answer(digest, HarnessFiles.read(repo))
    assert not isinstance(change, str), change

"""Held-out attacks on the worked-example and answer-order defences (``meta_agent.example_checks``, the
``worked-example`` and ``answer-last`` recipes, ``prompt_align.answer_last``), written after that code froze
(commit e124612), run once; a win stays as a strict xfail with its reason.  Pure text and the recipes' decisions:
no Docker, no model."""

from __future__ import annotations

import pytest

from meta_agent.agents.prompt_align import answer_last
from meta_agent.agents.recipe_example import worked_example
from meta_agent.example_checks import answer_first, corrected, wrong_examples


def _wrong(text: str) -> set[tuple[str, str, str]]:
    return {(w.kind, w.stated, w.computed) for w in wrong_examples(text)}


def test_a_wrong_product_written_with_a_times_sign_and_thousands_separators_is_named_and_corrected() -> None:
    text = "Example:\nQuestion: What is 1,250 × 4?\nReply:\n1,250 × 4 = 5,500\nAnswer: 5,500\n"
    assert ("result", "5_500", "5000") in _wrong(text), _wrong(text)
    fixed = corrected(text)
    assert "1,250 × 4 = 5000" in fixed and wrong_examples(fixed) == [], fixed


def test_a_wrong_intermediate_step_in_a_chain_is_named() -> None:
    assert _wrong("Working: 12 + 7 = 19, then 19 * 2 = 40.\nAnswer: 38\n") == {("result", "40", "38")}


def test_a_division_stated_as_its_whole_part_is_named() -> None:
    assert ("result", "3", "3.5") in _wrong("Example: 7 / 2 = 3\nAnswer: 3\n")


def test_a_negative_operand_and_result_are_read_right() -> None:
    assert _wrong("-3 - 4 = -7\nAnswer: -7\n") == set()
    assert _wrong("-3 - 4 = -1\nAnswer: -1\n") == {("result", "-1", "-7"), ("answer", "-1", "-7")}


@pytest.mark.xfail(strict=True, reason="held out, wins: an example in another number base reads as wrong decimal "
                   "arithmetic (101 + 1 = 110 in binary), and corrected() would write 102")
def test_an_example_in_another_base_is_not_named() -> None:
    assert _wrong("In binary, for example, 101 + 1 = 110.\n") == set()


@pytest.mark.xfail(strict=True, reason="held out, wins: a bold markdown answer line (**Answer:** 48) is no Answer: "
                   "line to the reading, so only the working's statement is named and the answer line stays wrong")
def test_a_markdown_answer_line_is_corrected_with_its_working() -> None:
    fixed = corrected("Example:\n6 * 7 = 48\n**Answer:** 48\n")
    assert "48" not in fixed, fixed


def test_a_worked_example_in_words_is_not_read_and_not_touched() -> None:
    """Arithmetic in words is outside the reading (it names nothing, and the recipe edits nothing)."""
    text = "Example: twelve plus seven is twenty.\nAnswer: 20\n"
    assert wrong_examples(text) == [] and corrected(text) == text


def test_an_equation_with_a_variable_and_a_power_are_no_statements() -> None:
    assert _wrong("Solve 2x + 3 = 11 for x.\nNote 2^3 + 1 = 9 and 3 ** 2 = 9.\n") == set()


def test_lead_with_an_unquoted_answer_line_is_reordered() -> None:
    text = "Lead with Answer: <number>, then justify it briefly.\n"
    assert answer_first(text) and answer_last(text) == "Justify it briefly, then end with Answer: <number>.\n"


@pytest.mark.xfail(strict=True, reason="held out, wins: 'Your first line must be ...; below it ...' names no lead "
                   "verb the reading knows (start/begin/put/give ...), so the answer-first request is not seen")
def test_a_first_line_must_be_request_is_seen() -> None:
    assert answer_first("Your first line must be \"Answer: <number>\"; below it, show the steps.\n")


@pytest.mark.xfail(strict=True, reason="held out, wins: an example answer labelled 'Final answer:' above its "
                   "working is no Answer: line to the reading")
def test_a_final_answer_label_above_the_working_is_seen() -> None:
    assert answer_first("Example:\nFinal answer: 12\n3 * 4 = 12\n")


def test_answer_first_without_working_after_it_is_not_named() -> None:
    """'Give only the result' prompts ask for the line and nothing after it: no order to fix."""
    assert answer_first("Start with \"Answer: <number>\" and nothing else.\nExample:\nAnswer: 12\n") == []


def test_the_recipe_declines_a_finding_it_cannot_find_in_the_templates() -> None:
    """A finding forged into a digest (the prompts are clean) moves nothing."""
    from test_worked_example import SEED_SYSTEM, _files
    digest = {"failure_modes": [{"name": "main:worked_example", "severity": "error", "rate": 1.0,
                                 "evidence": {"found": [{"line": "125 + 250 = 375", "computed": "999"}]}}]}
    why = worked_example(digest, _files(SEED_SYSTEM))
    assert isinstance(why, str) and "no template's text shows" in why, why

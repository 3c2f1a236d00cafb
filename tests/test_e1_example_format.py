"""Worked examples whose reply does not end on the line the verifier reads (issue 44, session 37, e1).

The prompt asks for ``Answer: <number>`` and shows an example whose reply ends otherwise; a small policy imitates
the example, so most replies carry no final answer the verifier reads.  Flaws of our own planted in main's
templates: the seed's example ending in prose, a few-shot block whose shot ends ``= 42``, an example ending ``The
answer is 42.``, and two examples of which one ends in prose.  Prompts read as text (``rows_of``: the runtime's
plain rendering), judged by ``add_main_findings``."""

from __future__ import annotations

import json

import pytest

from harness_repo.repo import SEEDS_DIR
from test_worked_example import QUESTIONS, digest_of, rows_of

MODE = "main:example_format"
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


@pytest.mark.xfail(strict=True, reason="attack: no mode reads whether an example's reply ends on the verifier's "
                                       "line; the digest names nothing of the example")
@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_attack_an_example_ending_off_the_verifiers_line_is_named(variant: str) -> None:
    system, user, line = PLANTED[variant]
    modes = digest_of(rows_of(system, user, QUESTIONS))["failure_modes"]
    assert any(line in json.dumps(m) for m in modes if str(m["name"]).startswith("main:")), modes

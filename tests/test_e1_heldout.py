"""Held-out attacks on ``main:example_format`` and the example-format recipe (issue 44, session 37, e1), written
after the code froze at 75445b5 and not designed for: the result of their first run is kept as it came (an attack
that wins stays a strict xfail with its reason).  Prompts read as text (``rows_of``), judged by ``add_main_findings``;
the recipe on the seed's other files."""

from __future__ import annotations

import pytest

from harness_repo.repo import SEEDS_DIR
from test_e1_example_format import MODE, SEED_SYSTEM, SEED_USER, _files
from test_worked_example import QUESTIONS, digest_of, rows_of

ASK = "Show your working, then finish with a line \"Answer: <number>\".\n\n"
MISSED = {  # examples ending off the verifier's line: each should be named, the recipe should end it on its value
    "markdown-labels": (ASK + "**Q:** What is 8 * 9?\n**A:** 8 * 9 = 72\n", "72"),
    "answer-equals": (ASK + "Example:\nQuestion: What is 31 + 11?\nReply:\n31 + 11 = 42\nAnswer = 42\n", "42"),
    "number-words-after": (ASK + "Example:\nQuestion: What is 125 + 250?\nReply:\n125 + 250 = 375, so three "
                           "hundred seventy-five.\n", "375"),
    "latex-working": (ASK + "Worked example:\nQuestion: What is 8 times 9?\nSolution:\n$8 \\times 9 = 72$\n", "72"),
    "user-assistant": (ASK + "User: What is 9 * 9?\nAssistant: 9 * 9 = 81, done.\n", "81"),
    "inline-shot": (ASK + "Example: Q: What is 5 + 6? A: 5 + 6 = 11.\n", "11"),
    "units-last": (ASK + "Example:\nQuestion: Sam has 40 apples and buys 2 more. How many now?\nReply:\n"
                   "40 + 2 = 42, so she has 42 apples.\n", "42"),
    "aside-last": (ASK + "Example:\nQuestion: What is 12 + 30?\nReply:\n12 + 30 = 42, which is 6 times 7.\n", "42"),
    "prose-no-number-last": (ASK + "Example:\nQuestion: What is 40 + 2?\nReply:\nAdding gives 42 apples left "
                             "over in the end.\n", "42"),
}
WINS = {  # won at the first run (754fa6a); inline-shot won too and was fixed after it (now in-sample)
    "aside-last": "the reply's last number (7, an aside) disagrees with its arithmetic's result (42): the value is "
                  "ambiguous and the recipe declines, though 42 is the answer",
    "prose-no-number-last": "a reply that neither states a result nor ends on a number is not judged (kept so that "
                            "instructions and asides are not taken for replies)",
}


def _cases(table: dict, wins: dict) -> list:
    return [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=wins[k])) if k in wins else k
            for k in sorted(table)]


@pytest.mark.parametrize("variant", _cases(MISSED, WINS))
def test_heldout_an_example_ending_off_the_line_is_named_and_ended_on_its_value(variant: str) -> None:
    from meta_agent.agents.recipe_example_format import example_format
    from meta_agent.example_format import unread_examples

    system, value = MISSED[variant]
    digest = digest_of(rows_of(system, SEED_USER, QUESTIONS))
    assert MODE in [m["name"] for m in digest["failure_modes"]], digest["failure_modes"]
    change = example_format(digest, _files(system, SEED_USER))
    assert not isinstance(change, str), change
    new = change.files["prompts/system.j2"]
    assert f"\nAnswer: {value}\n" in new + "\n" and unread_examples(new) == [], new


FINE = {  # prompts whose examples the verifier reads, or that show no example: nothing should be named
    "boxed": ASK + "Example:\nQuestion: What is 6 * 7?\nReply:\n6 * 7 = 42, so \\boxed{42}\n",
    "answer-then-aside": ASK + "Example:\nQuestion: What is 6 * 7?\nReply:\n6 * 7 = 42\nAnswer: 42\nThat is all.\n",
    "instruction-example": "Work it out. For example, if the sum is 12, write Answer: 12.\n",
    "instruction-example-own-line": "Work it out.\nFor example, if the sum is 12, write Answer: 12.\n",
    "instruction-e.g.": "Give one line of working (e.g. 3 + 4 = 7), then the line \"Answer: <number>\".\n",
    "question-only-example": ASK + "Example question:\nWhat is 14 + 28?\n",
    "final-answer-label": ASK + "Example:\nQ: What is 6 * 7?\nA: 6 * 7 = 42\nFinal answer: 42\n",
    "seed-user-as-system": SEEDS_DIR.joinpath("math", "prompts", "user.j2").read_text().replace(
        "{{ question }}", "Problem 3: What is 2 + 2?") + "\n" + SEED_SYSTEM,
}
FINE_WINS: dict[str, str] = {}
"""instruction-example was predicted to win and did not (its line opens with "Work it out.");
instruction-example-own-line won at the first run (754fa6a: a false finding, "For example, ... write Answer:" read as
a heading) and was fixed after it (a heading ending on the verifier's label is an instruction): now in-sample."""


@pytest.mark.parametrize("variant", _cases(FINE, FINE_WINS))
def test_heldout_an_example_the_verifier_reads_or_no_example_is_named_nothing(variant: str) -> None:
    digest = digest_of(rows_of(FINE[variant], SEED_USER, QUESTIONS))
    assert digest["main_checks"]["example_format"]["passed"], digest["main_checks"]["example_format"]

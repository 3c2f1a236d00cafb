"""An example ending on a labelled line the verifier does not read, and instructions asking for that same label
(issue 44; the first held-out set's format-mismatch, in-sample since, and variants of our own).

The prompt asks for a final ``#### <number>`` line (a GSM8K habit) and its example ends ``#### 375``: the example-format
edit used to add ``Answer: 375`` below the example's last line and leave every instruction asking for ``####``, so
the prompt asked for one form and showed two.  Now an example's last line that is a label and its value alone is
that label's line: it becomes ``Answer: <value>``, and each instruction asking for ``<label> <placeholder>`` in either
template asks for ``Answer: <number>``.
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_example_label.py
"""

from __future__ import annotations

import re

import pytest

from meta_agent.agents.recipe_example_format import example_format
from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.example_format import MODE, unread_examples

CASES = {  # label -> (system, user): the example's last line and the instruction in its label's form
    "####": ("You are a careful math assistant. Work it out in one line, then give the result on a final line of the "
             "form \"#### <number>\".\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n125 + 250 = 375\n#### 375\n",
             "{{ question }}\n\nEnd with the line \"#### <number>\".\n"),
    "Final:": ("Solve it. Your last line must read \"Final: <integer>\".\n\nExample:\nQuestion: What is 6 * 7?\n"
               "Reply:\n6 * 7 = 42\nFinal: 42\n", "{{ question }}\nRemember: Final: <integer> last.\n"),
    "=>": ("Think step by step.\n\nQ: What is 90 - 36?\nA: 90 - 36 = 54\n=> 54\n\nFinish with => <n>.\n",
           "{{ question }}\n"),
}


def _edit(system: str, user: str) -> Change:
    digest = {"failure_modes": [{"name": MODE, "rate": 1.0, "severity": "warning", "evidence": {"found": []}}]}
    change = example_format(digest, HarnessFiles("grpo: {}\n", None, user, system_prompt=system))
    assert isinstance(change, Change), change
    return change


@pytest.mark.parametrize("label", list(CASES))
def test_the_label_the_verifier_does_not_read_is_asked_for_nowhere_after_the_edit(label: str) -> None:
    system, user = CASES[label]
    assert unread_examples(system)  # the example is named before the edit
    change = _edit(system, user)
    texts = {"prompts/system.j2": system, "prompts/user.j2": user} | change.files
    asked = re.compile(re.escape(label) + r"\s*<[^<>\n]*>")
    assert {path: asked.findall(text) for path, text in texts.items()} == {path: [] for path in texts}
    assert {path: unread_examples(text) for path, text in texts.items()} == {path: [] for path in texts}
    assert "Answer: <number>" in texts["prompts/system.j2"]
    value_line = [line for line in texts["prompts/system.j2"].splitlines() if line.startswith("Answer: ")
                  and line != "Answer: <number>"]
    assert len(value_line) == 1 and not any(line.strip().startswith(label) for line in
                                            texts["prompts/system.j2"].splitlines()), texts["prompts/system.j2"]


def test_a_label_that_is_not_alone_on_its_line_is_left_and_the_instruction_too() -> None:
    """The example's last line holds working beside the value (``So #### 375 it is``): not a label line; the
    example still ends on ``Answer: 375`` below it, and an instruction with no placeholder is text, not asked."""
    system = ("Give the result last.\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n125 + 250 = 375, so #### 375 "
              "it is\n")
    change = _edit(system, "{{ question }}\n")
    assert change.files["prompts/system.j2"].endswith("so #### 375 it is\nAnswer: 375\n")
    assert "prompts/user.j2" not in change.files


WORDS = ("Give the result on a final line \"Answer: <the number written out in English words>\".\n\nExample:\n"
         "Question: What is 125 + 250?\nReply:\n125 + 250 = 375\nAnswer: three hundred seventy-five\n",
         "{{ question }}\n\nEnd with the line \"Answer: <the number in words>\".\n")


def test_an_unread_answer_line_s_placeholder_is_asked_as_a_number() -> None:
    """The example's ``Answer:`` line is in words (12c's words-answer, in-sample; the edit writes ``Answer: 375``),
    and each instruction's placeholder describes that unread form: both ask for ``Answer: <number>`` after the edit."""
    system, user = WORDS
    change = _edit(system, user)
    texts = {"prompts/system.j2": system, "prompts/user.j2": user} | change.files
    placeholders = {path: re.findall(r"Answer:\s*(<[^<>\n]*>)", text) for path, text in texts.items()}
    assert placeholders == {"prompts/system.j2": ["<number>"], "prompts/user.j2": ["<number>"]}
    assert "Answer: 375\n" in texts["prompts/system.j2"] and "words" not in "".join(texts.values())

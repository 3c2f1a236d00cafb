"""The search's prompt family offers the cue removal where main:answer_cue is not named (a round whose replies did
not show it: fewer than half without a final answer): a user template ending on a cue the reply would continue gets
the edit answer-cue makes; a template ending on an instruction, the question or template code gets none.  Real git;
the candidate's text read as the runtime will render it (Jinja comments aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.agents.search import candidates

INSTRUCTION = 'End your reply with the line "Answer: <number>"'


@pytest.mark.parametrize("user, left", [
    ("Question: {{ question }}\nAnswer:", "Question: {{ question }}"),
    ("Q: What is 1 + 1?\nA: 2\n\nQ: {{ question }}\nA:", "Q: What is 1 + 1?\nAnswer: 2\n\nQ: {{ question }}"),
    ("{{ question }}\nThe final answer is $\\boxed{", "{{ question }}"),
])
def test_a_template_ending_on_a_cue_gets_the_cue_removed_and_the_line_asked_last(tmp_path: Path, user: str,
                                                                                left: str) -> None:
    repo = HarnessRepo.create(tmp_path / "h", "math")
    repo.commit_files({"prompts/user.j2": user}, "a cue")
    [edit] = [c for c in candidates("prompt", HarnessFiles.read(repo), "no_final_answer")
              if c.key == "search:answer-cue"]
    assert set(edit.files) == {"prompts/user.j2"}, edit.files
    text = edit.files["prompts/user.j2"]
    assert text.startswith(left + "\n") and text.rstrip().splitlines()[-1].startswith(INSTRUCTION), text


@pytest.mark.parametrize("user", [None, "{{ question }}", "{{ question }}\n\nShow your working.{# Answer: #}",
                                  "{% if question %}{{ question }}{% endif %}"])
def test_a_template_ending_on_an_instruction_or_the_question_gets_no_cue_edit(tmp_path: Path, user) -> None:
    repo = HarnessRepo.create(tmp_path / "h", "math")
    if user is not None:
        repo.commit_files({"prompts/user.j2": user}, "no cue")
    keys = [c.key for c in candidates("prompt", HarnessFiles.read(repo), "no_final_answer")]
    assert keys and "search:answer-cue" not in keys, keys

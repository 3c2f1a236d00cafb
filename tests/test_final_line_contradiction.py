"""final-answer-prompt takes out the template's own request for the value alone.

A user template that says "respond with the number and nothing else" (an evaluation prompt's habit) against the
system prompt's ``Answer:`` line makes a small policy write a bare number the verifier cannot read.  Appending the
request for the line left the contradiction in place, the nearer of the two instructions still first: 12l's
number-only-instruction was merged on probation and not repaired at sets 18-19.
"""

from __future__ import annotations

import jinja2
import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipes import final_answer_prompt
from test_recipe_agent import propose, quiet_digest

ALONE = ["Reply with just the number.", "Output only the final value, with no explanation.",
         "Give the result and nothing else.", "Write the answer only."]
"""Requests for the bare value, worded as templates word them."""


def rendered(repo: HarnessRepo, ref: str) -> str:
    template = repo.read_file(ref, "prompts/user.j2")
    return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(
        question="Solve the following multiplication: 6 * 7. Give only the result as your final answer.")


@pytest.mark.parametrize("request_alone", ALONE)
def test_a_request_for_the_value_alone_is_taken_out_with_the_line_asked(tmp_path, request_alone: str) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/user.j2": "{{ question }}\n\nShow your working. " + request_alone + "\n"}, "user")
    [p] = propose(repo, quiet_digest(no_final_answer_rate=0.9), rules=(final_answer_prompt,))
    text = rendered(repo, p.branch)
    assert request_alone not in text, text
    assert "Show your working." in text  # what does not contradict the line stays
    assert text.startswith("Solve the following multiplication: 6 * 7. Give only the result as your final answer.")
    assert '"Answer: <number>"' in text


def test_a_template_that_asks_for_nothing_alone_keeps_every_line(tmp_path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    user = "{{ question }}\n\nThink it through, then answer.\n"
    repo.commit_files({"prompts/user.j2": user}, "user")
    [p] = propose(repo, quiet_digest(no_final_answer_rate=0.9), rules=(final_answer_prompt,))
    assert repo.read_file(p.branch, "prompts/user.j2").startswith(user.rstrip("\n"))

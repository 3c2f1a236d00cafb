"""Prompt edits that align the answer line a prompt asks for with what the verifier reads, built from the prompt's
own lines (never from a planted text): a placeholder asking for another form becomes the verifier's ``<number>``,
and a worked example whose answer line the verifier cannot read takes the number its own working ends with."""

from __future__ import annotations

from pathlib import Path

import yaml

import harness_repo
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.agents.search import candidates

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"
ROMAN_SYSTEM = ("You solve arithmetic. Show one line of working, then a final line \"Answer: <the value as a Roman "
                "numeral>\".\n\nFor instance:\nQuestion: What is 40 + 2?\nReply:\n40 + 2 = 42\nAnswer: XLII\n")
ROMAN_USER = "{{ question }}\n\nFinish with \"Answer: <Roman numeral>\".\n"


def _files(system: str, user: str) -> HarnessFiles:
    config = yaml.safe_load((SEED / "harness.yaml").read_text())
    return HarnessFiles(yaml.safe_dump(config, sort_keys=False), (SEED / "reward.py").read_text(), user,
                        (SEED / "filters.py").read_text(), system_prompt=system)


def test_a_prompt_asking_for_an_unreadable_answer_form_gets_an_aligned_edit() -> None:
    [aligned] = [c for c in candidates("prompt", _files(ROMAN_SYSTEM, ROMAN_USER), "no_final_answer")
                 if c.key == "search:aligned-answer-line"]
    system, user = aligned.files["prompts/system.j2"], aligned.files["prompts/user.j2"]
    assert "Roman" not in system + user and "XLII" not in system, (system, user)
    assert 'final line "Answer: <number>"' in system and "40 + 2 = 42\nAnswer: 42\n" in system, system
    assert user == "{{ question }}\n\nFinish with \"Answer: <number>\".\n"
    assert any(e.startswith("no_final_answer_rate decrease") for e in aligned.effects)


def test_the_seed_prompt_needs_no_alignment() -> None:
    files = _files((SEED / "prompts" / "system.j2").read_text(), (SEED / "prompts" / "user.j2").read_text())
    assert not [c for c in candidates("prompt", files, "no_final_answer") if c.key == "search:aligned-answer-line"]

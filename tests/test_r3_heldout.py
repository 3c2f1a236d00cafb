"""Held-out attacks on r3's checks and recipes (written after freezing them at cb4fb68, none designed for): what
each does to main's prompts, and whether main's checks name it and the recipe repairs it.  Wins stay strict
xfails with why."""

from __future__ import annotations

import pytest
from test_r3_trainer_prompts import SEED, SEED_CONFIG, SEED_USER, files_of, names

from meta_agent.agents.recipe_markup import strip_markup
from meta_agent.agents.recipe_types import Change

SYSTEM = (SEED / "prompts/system.j2").read_text()


def test_end_of_text_token_closing_the_user_template() -> None:
    """A template ported from a completion pipeline ends the prompt on the tokenizer's end-of-text token."""
    user = SEED_USER.rstrip("\n") + "<|endoftext|>\n"
    found = names(user, SEED_CONFIG)
    assert found["main:chat_markup"]["evidence"]["tokens"] == ["<|endoftext|>"]
    change = strip_markup({"failure_modes": list(found.values())}, files_of(user, SEED_CONFIG))
    assert isinstance(change, Change) and change.files["prompts/user.j2"] == SEED_USER.rstrip("\n") + "\n"


@pytest.mark.xfail(strict=True, reason="wins: the lengths are measured by re-filling an archived prompt of a kind "
                                       "that fit; a template that lengthens only the dropped kind's prompt "
                                       "(branching on task.name) is never seen, since the archive holds none")
def test_template_lengthening_only_one_kind() -> None:
    user = ('{% if task.name == "products" %}Multiply carefully, digit by digit, checking each partial product '
            'against the digits you wrote before, and then add the partial products in columns.\n{% endif %}'
            + SEED_USER)
    tight = {**SEED_CONFIG, "grpo": {**SEED_CONFIG["grpo"], "max_prompt_length": 130}}
    assert names(user, tight)["main:prompt_length"]["evidence"]["dropped"]["products"] == 1.0


def test_markup_in_the_system_template_only() -> None:
    """The system prompt, not the user's, writes its own turn markers: main's rows under it are named, and the
    recipe edits system.j2 alone, back to the text between the markers."""
    marked = "<|im_start|>system\n" + SYSTEM.rstrip("\n") + "<|im_end|>\n"
    found = names(SEED_USER, SEED_CONFIG, system=marked)
    assert found["main:chat_markup"]["rate"] == 1.0
    files = files_of(SEED_USER, SEED_CONFIG)
    files.system_prompt = marked
    change = strip_markup({"failure_modes": list(found.values())}, files)
    assert isinstance(change, Change) and set(change.files) == {"prompts/system.j2"}
    assert change.files["prompts/system.j2"] == SYSTEM.rstrip("\n") + "\n"

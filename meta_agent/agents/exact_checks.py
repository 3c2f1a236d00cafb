"""A recipe's edit whose symptom is a property of main's files, judged exactly: the trusted check re-run on the branch.

Each reader answers None for a change it does not judge, "" where the branch passes the check main fails, or why
not.  The search agent asks these before any generation preview: a preview over a few drawn tasks cannot see a task
weight, a template's text, a step's shape, a budget against the exam, chat markup or a length limit.

    why = exact_check(digest, change)   # None: no exact check judges it (preview it); "": proposed; else withheld
"""

from __future__ import annotations

from collections.abc import Callable

from meta_agent.agents.preview_evidence import config_evidence
from meta_agent.agents.recipe_budget import budget_evidence
from meta_agent.agents.recipe_limits import limit_evidence
from meta_agent.agents.recipe_markup import markup_evidence
from meta_agent.agents.recipe_question import question_evidence
from meta_agent.agents.recipe_shape import shape_evidence
from meta_agent.agents.recipe_slice import slice_evidence
from meta_agent.agents.recipe_types import Change

READERS: tuple[Callable[[dict, Change], str | None], ...] = (
    config_evidence,  # the task mix against the exam's
    question_evidence,  # the templates' text, re-read
    shape_evidence,  # the step's shape, scored (a3)
    budget_evidence,  # the budget against the exam (a3)
    slice_evidence,  # a dead slice's weights (k2)
    markup_evidence,  # the templates' chat markup (r3)
    limit_evidence,  # the measured prompt lengths against the limit
)


def exact_check(digest: dict, change: Change) -> str | None:
    """The first reader's answer that judges ``change`` (None where none does)."""
    for read in READERS:
        if (why := read(digest, change)) is not None:
            return why
    return None

"""A training budget the exam punishes: named from main's knobs, the trusted exam's budget and the round's answers;
the budget fitted to what the answers need, at most the exam's.

Held-out set 12i's budget-over-exam (max_completion_length 384 where the exam generates 96) with its round 0 as
archived (``/work/live-runs/12i/budget-over-exam``, seed 0: 8 training answers, none right, the longest 87 tokens;
the exam's 4), and plants of our own: a budget of 1.5x the exam's where training pays answers past the exam's cut,
and a budget below what the exam's right answers take.  No model here: the digest, main's checks and the recipe
table on a real git harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_a3_shape import judged
from test_stall import _repo

from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.agents.recipes import RULES

EXAM = 96
OVER = [  # 12i budget-over-exam, round 0, seed 0: (split, group, step, reward, verified, tokens, cut, response)
    ("train", "s0-g0", 0, 0.0, 0.0, 20, False, "I'm sorry for the confusion. \n\nThe answer is 0 after a 4."),
    ("train", "s0-g0", 0, 0.0, 0.0, 27, False, 'The answer to the question "Question: What is 125 + 250?" is: 375'),
    ("train", "s0-g0", 0, 0.0, 0.0, 8, False, "1 + 4 = 5"),
    ("train", "s0-g0", 0, 0.0, 0.0, 87, False, "That's a great summary of the answer to the arithmetic problem."),
    ("train", "s0-g1", 0, 0.0, 0.0, 16, False, "10\n\nYou are correct, 10 is the answer."),
    ("train", "s0-g1", 0, 0.0, 0.0, 4, False, "105"),
    ("train", "s0-g1", 0, 0.0, 0.0, 7, False, "The answer is 9."),
    ("train", "s0-g1", 0, 0.0, 0.0, 17, False, "I'll give you the same result. 9 * 1 = 9"),
    ("heldout", "heldout-0", 1, None, 0.0, 12, False, "3 - 9 = \nAnswer: 2"),
    ("heldout", "heldout-1", 1, None, 0.0, 18, False, "2 * 9 * 3 = 24\nAnswer: 24"),
    ("heldout", "heldout-2", 1, None, 0.0, 20, False, "4 * 5 * 5 = 125\nAnswer: 125"),
    ("heldout", "heldout-3", 1, None, 0.0, 11, False, "The answer to the arithmetic problem is 1."),
]
KNOBS = {"group_size": 4, "prompts_per_step": 2, "steps_per_round": 1}


def answers(tokens: list[int], right: list[bool], split: str = "train", group: str = "s0-g0") -> list[tuple]:
    return [(split, f"{group}" if split == "train" else f"heldout-{i}", 0, float(ok) if split == "train" else None,
             float(ok), n, False, f"{i} + 1 = {i + 1}\nAnswer: {i + 1 if ok else -1}")
            for i, (n, ok) in enumerate(zip(tokens, right, strict=True))]


def budgets_proposed(spec: list[tuple], budget: int, tmp_path: Path) -> list[int]:
    digest = judged(spec, **KNOBS, max_completion_length=budget)
    files = HarnessFiles.read(_repo(tmp_path, **KNOBS, max_completion_length=budget))
    out = []
    for rule in RULES:
        change = rule(digest, files)
        if isinstance(change, Change) and "harness.yaml" in change.files:
            new = yaml.safe_load(change.files["harness.yaml"])["grpo"].get("max_completion_length")
            if new != budget:
                out.append(new)
    return out


def budget_modes(spec: list[tuple], budget: int) -> list[dict]:
    digest = judged(spec, **KNOBS, max_completion_length=budget)
    return [m for m in digest["failure_modes"] if str(m["name"]).startswith("main:budget")]


def test_12i_budget_over_exam_is_named_and_fitted_within_the_exam(tmp_path: Path) -> None:
    [m] = budget_modes(OVER, 384)
    assert m["evidence"]["exam_budget"] == EXAM and m["evidence"]["budget"] == 384, m
    proposed = budgets_proposed(OVER, 384, tmp_path)
    assert proposed == [25], (proposed, m["evidence"])  # the exam's 3 finished answers (12-20 tokens): 20 x 1.25


PAID_LONG = answers([30, 40, 110, 120, 60, 130, 25, 140], [True, True, True, True, False, False, True, False]) + \
    answers([40, 50, 35, 60], [True, True, False, True], split="heldout")


def test_a_budget_of_1_5x_the_exams_paying_past_its_cut_is_an_error_and_lowered(tmp_path: Path) -> None:
    [m] = budget_modes(PAID_LONG, 144)
    assert m["severity"] == "error" and m["evidence"]["paid_over_exam"] == pytest.approx(2 / 5), m
    proposed = budgets_proposed(PAID_LONG, 144, tmp_path)
    assert proposed == [EXAM], proposed  # what the paid answers need is past the exam's cut: the exam's budget


CUT = answers([16] * 8, [False] * 8) + answers([22, 26, 30, 24], [True, True, True, False], split="heldout")


def test_a_budget_below_what_the_exams_right_answers_take_is_raised_to_their_need(tmp_path: Path) -> None:
    """The other direction: training's 16 tokens cut every answer; the exam's right answers took 22-30."""
    cut = [(s, g, st, r, v, n, True, t.split("\n")[0]) for s, g, st, r, v, n, _, t in CUT if s == "train"]
    spec = cut + [row for row in CUT if row[0] == "heldout"]
    [m] = budget_modes(spec, 16)
    assert m["name"] == "main:budget_cuts_answers" and m["rate"] == 1.0, m
    assert budgets_proposed(spec, 16, tmp_path) == [38], m["evidence"]  # 90th percentile 30, plus a quarter


@pytest.mark.parametrize("budget", [32, EXAM])
def test_a_budget_within_the_exams_that_answers_fit_is_named_nothing(budget: int) -> None:
    spec = answers([14, 18, 20, 12], [True, False, True, True]) + answers([12, 18, 20], [True, True, False],
                                                                         split="heldout")
    assert budget_modes(spec, budget) == []
    digest = judged(spec, **KNOBS, max_completion_length=budget)
    assert digest["main_checks"]["completion_budget"]["passed"], digest["main_checks"]["completion_budget"]



def test_the_fitted_budget_carries_exact_evidence_and_a_longer_one_does_not(tmp_path: Path) -> None:
    from dataclasses import replace

    from meta_agent.agents.recipe_budget import budget_evidence
    from meta_agent.agents.recipe_generation import truncation
    digest = judged(OVER, **KNOBS, max_completion_length=384)
    change = truncation(digest, HarnessFiles.read(_repo(tmp_path, **KNOBS, max_completion_length=384)))
    assert isinstance(change, Change) and budget_evidence(digest, change) == "", change
    config = yaml.safe_load(change.files["harness.yaml"])
    config["grpo"]["max_completion_length"] = 192
    assert "outside" in budget_evidence(digest, replace(change, files={"harness.yaml": yaml.safe_dump(config)}))


def test_the_exams_answers_reach_the_check_as_the_digest_phase_passes_them() -> None:
    """The digest phase's ``rows`` are training's; the exam's come as ``exam`` (``stall_checks.EXAM_COLUMNS``): a
    budget cutting every training answer is named from the exam's right answers alone."""
    from test_a3_shape import rows_of

    from meta_agent.digest import build_digest
    from meta_agent.main_checks import add_main_findings
    from meta_agent.stall_checks import EXAM_COLUMNS
    train = [r for r in rows_of(CUT) if r["split"] == "train"]
    for r in train:
        r["truncated"] = True
    exam = [{k: r[k] for k in EXAM_COLUMNS if k in r} | {"task_id": r["traj_id"]} for r in rows_of(CUT)
            if r["split"] == "heldout"]
    digest = build_digest(0, train, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, train, (0.0, 1.0), knobs={**KNOBS, "max_completion_length": 16}, exam_max_tokens=EXAM,
                      exam=exam)
    [m] = [m for m in digest["failure_modes"] if m["name"] == "main:budget_cuts_answers"]
    assert m["evidence"]["target"] == 38 and m["rate"] == 1.0, m

"""A step of too few prompts for the round's flat-group rate: named from the round, reshaped at the same rollouts.

Held-out set 12i's one-prompt-steps (prompts_per_step 1, groups of 16: a step's gradient is one question's group) and
plants of our own: 2 prompts of 8 with both groups flat, and the other way, groups of 2 too small to mix.  The 12i
rows are its round 0 as archived (``/work/live-runs/12i/one-prompt-steps``, seed 0: one group of 16 answers to
"0 + 4 =", none right; the exam's 4 answers).  No model here: the digest, main's checks and the recipe table on a real
git harness; each shape a reshape proposes keeps the rollouts a step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_stall import _repo

from meta_agent.agents.recipe_evidence import from_rows
from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.agents.recipes import REMEDIES, RULES
from meta_agent.digest import build_digest
from meta_agent.main_checks import add_main_findings

RANGE = (0.0, 1.0)
GENERIC = {"zero_variance", "zero_variance_groups"}
ONE_PROMPT = [  # 12i one-prompt-steps, round 0, seed 0: (split, group, step, reward, verified, tokens, cut, response)
    *[("train", "s0-g0", 0, 0.0, 0.0, n, cut, text) for n, cut, text in [
        (32, True, "I'm a math assistant, and I'm going to provide you with a math problem."),
        (13, False, "The answer to the given arithmetic problem is 12."), (3, False, "10"),
        (14, False, "That's a classic arithmetic problem. The answer is 2."),
        (32, True, "You're right, I did a great job reviewing the math in this example."),
        (22, False, "Same answer as 125 + 250, so answer: 375"),
        (32, True, "The answer to the arithmetic problem is 0. However, to provide a more interactive"),
        (32, True, "I'm currently working with an equation that represents the sum of (12 + 10) = 120"),
        (22, False, 'None.\n\nYou need to leave your answer in the form of "Answer: <number>".'),
        (14, False, "125 + 250 = 375"), (12, False, "The final answer to the arithmetic problem is 7."),
        (13, False, "No, no, no! That's not a number."),
        (19, False, "If you want to add 0 to any number, it will always add to itself."),
        (23, False, "This is a mathematical problem in binary. The answer is 4."), (4, False, "250"),
        (32, True, "The answer to the arithmetic problem is 0.\n\nThis is a classic example")]],
    ("heldout", "heldout-0", 1, None, 0.0, 12, False, "3 - 9 = \nAnswer: 2"),
    ("heldout", "heldout-1", 1, None, 0.0, 18, False, "2 * 9 * 3 = 24\nAnswer: 24"),
    ("heldout", "heldout-2", 1, None, 0.0, 20, False, "4 * 5 * 5 = 125\nAnswer: 125"),
    ("heldout", "heldout-3", 1, None, 0.0, 11, False, "The answer to the arithmetic problem is 1."),
]


def _reason(verified: float, cut: bool, text: str) -> str:
    """The math verifier's reason, as archived: a reply without an ``Answer:`` line (or cut) has no final answer."""
    return "no final answer" if cut or "answer:" not in text.lower() else "ok" if verified else "different value"


def rows_of(spec: list[tuple]) -> list[dict]:
    return [{"traj_id": f"t{i}", "split": split, "group_id": group, "step": step, "reward": reward,
             "verified": verified, "response_tokens": tokens, "truncated": cut, "response": text, "kept": True,
             "verifier_info": json.dumps({"reason": _reason(verified, cut, text)}),
             "prompt": "What is 0 + 4?", "ground_truth": '{"answer": "4"}', "data_source": "reasoning_gym/chain_sum"}
            for i, (split, group, step, reward, verified, tokens, cut, text) in enumerate(spec)]


def groups(shape: list[tuple[int, int]], tokens: int = 14) -> list[tuple]:
    """Training groups, one per (size, right answers), all in step 0; a right answer is paid and verified."""
    out = []
    for g, (size, right) in enumerate(shape):
        out += [("train", f"s0-g{g}", 0, float(i < right), float(i < right), tokens, False,
                 f"{g} + {i} = {g + i}\nAnswer: {g + i if i < right else -1}") for i in range(size)]
    return out


def judged(spec: list[tuple], **knobs) -> dict:
    rows = rows_of(spec)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    digest["evidence"] = from_rows(rows)
    add_main_findings(digest, rows, RANGE, knobs=knobs, exam_max_tokens=96)
    return digest


def shapes_proposed(digest: dict, tmp_path: Path, **knobs) -> list[tuple[int, int]]:
    """(group_size, prompts_per_step) of every rule's change to main's step shape, main planted with ``knobs``."""
    files = HarnessFiles.read(_repo(tmp_path, **knobs))
    out = []
    for rule in RULES:
        change = rule(digest, files)
        if isinstance(change, Change) and "harness.yaml" in change.files:
            grpo = yaml.safe_load(change.files["harness.yaml"])["grpo"]
            shape = (grpo.get("group_size"), grpo.get("prompts_per_step"))
            if shape != (knobs["group_size"], knobs["prompts_per_step"]):
                out.append(shape)
    return out


def named(digest: dict) -> list[dict]:
    return [m for m in digest["failure_modes"] if m["severity"] in ("warning", "error") and m["name"] not in GENERIC
            and str(m["name"]).startswith("main:")]


ONE = {"group_size": 16, "prompts_per_step": 1, "steps_per_round": 1}


def test_12i_one_prompt_steps_is_named_with_its_measured_steps() -> None:
    digest = judged(ONE_PROMPT, **ONE)
    [m] = named(digest)
    assert m["name"] == "main:step_shape" and REMEDIES[m["name"]], m
    ev = m["evidence"]
    assert ev["groups"] == 1 and ev["flat_groups"] == 1 and ev["steps"] == 1 and ev["steps_without_gradient"] == 1
    assert ev["best"]["prompts_per_step"] > 1 and ev["best"]["share"] < m["rate"], ev


def test_12i_one_prompt_steps_is_reshaped_to_more_prompts_at_16_rollouts(tmp_path: Path) -> None:
    shapes = shapes_proposed(judged(ONE_PROMPT, **ONE), tmp_path, **ONE)
    assert shapes and {g * k for g, k in shapes} == {16} and min(k for _, k in shapes) >= 2, shapes


TWO_FLAT = {"group_size": 8, "prompts_per_step": 2, "steps_per_round": 1}


def test_two_flat_groups_of_8_are_reshaped_to_more_prompts(tmp_path: Path) -> None:
    digest = judged(groups([(8, 0), (8, 0)]), **TWO_FLAT)
    shapes = shapes_proposed(digest, tmp_path, **TWO_FLAT)
    assert shapes and {g * k for g, k in shapes} == {16} and min(k for _, k in shapes) >= 4, shapes


TINY = {"group_size": 2, "prompts_per_step": 8, "steps_per_round": 1}


def test_groups_too_small_to_mix_are_reshaped_to_larger_ones(tmp_path: Path) -> None:
    """The other direction (a guard: larger-groups did this before; the reshape must not undo it)."""
    digest = judged(groups([(2, 0)] * 5 + [(2, 1)] * 3), **TINY)
    shapes = shapes_proposed(digest, tmp_path, **TINY)
    assert shapes and {g * k for g, k in shapes} == {16} and min(g for g, _ in shapes) >= 4, shapes


SEED = {"group_size": 4, "prompts_per_step": 4, "steps_per_round": 3}


@pytest.mark.parametrize("right", [[0, 1, 2, 1, 0, 1, 3, 0, 1, 1, 2, 0],  # 4 of 12 flat, as the seed's round 0
                                   [0] * 12])                              # nothing solved: no shape mixes better
def test_the_seeds_shape_is_named_nothing(right: list[int]) -> None:
    digest = judged(groups([(4, r) for r in right]), **SEED)
    assert [m for m in digest["failure_modes"] if m["name"] == "main:step_shape"] == [], digest["failure_modes"]
    assert digest["main_checks"]["step_shape"]["passed"], digest["main_checks"]


def test_the_bench_control_shape_is_named_nothing() -> None:
    """The offline bench's control: 2 prompts of 4 a step, one step; one group flat."""
    digest = judged(groups([(4, 0), (4, 2)]), group_size=4, prompts_per_step=2, steps_per_round=1)
    assert digest["main_checks"]["step_shape"]["passed"], digest["main_checks"]["step_shape"]


def test_the_reshape_carries_exact_evidence_a_preview_cannot_give(tmp_path: Path) -> None:
    """What the search agent would read in place of a generation preview: the branch's shape scored on the round."""
    from dataclasses import replace

    from meta_agent.agents.recipe_batch import larger_groups
    from meta_agent.agents.recipe_shape import shape_evidence
    digest = judged(ONE_PROMPT, **ONE)
    files = HarnessFiles.read(_repo(tmp_path, **ONE))
    change = larger_groups(digest, files)
    assert isinstance(change, Change) and shape_evidence(digest, change) == "", change
    config = yaml.safe_load(change.files["harness.yaml"])
    config["grpo"].update(group_size=2, prompts_per_step=8)  # below the groups that mix: never scored
    worse = replace(change, files={"harness.yaml": yaml.safe_dump(config)})
    assert "not scored" in shape_evidence(digest, worse)
    assert shape_evidence(judged(groups([(4, 0), (4, 2)]), group_size=4, prompts_per_step=2), change) is None


def test_one_group_all_right_and_one_all_wrong_is_not_reshaped_below_groups_of_4(tmp_path: Path) -> None:
    """Solve rate 0.5 mixes groups of 2 on paper; a round of two groups cannot show that such groups mix."""
    knobs = {"group_size": 4, "prompts_per_step": 2, "steps_per_round": 1}
    digest = judged(groups([(4, 4), (4, 0)]), **knobs)
    # no shape at groups of 4 or more scores better, and none below 4 is offered: main's shape stays
    assert shapes_proposed(digest, tmp_path, **knobs) == [], digest["failure_modes"]


def test_the_search_offers_every_better_scored_shape_each_with_exact_evidence(tmp_path: Path) -> None:
    from meta_agent.agents.recipe_shape import shape_evidence
    from meta_agent.agents.search_knobs import shape_edits
    digest = judged(ONE_PROMPT, **ONE)
    offered = shape_edits(digest, HarnessFiles.read(_repo(tmp_path, **ONE)))
    shapes = [(g["group_size"], g["prompts_per_step"]) for c in offered
              for g in [yaml.safe_load(c.files["harness.yaml"])["grpo"]]]
    assert shapes == [(4, 4), (8, 2)], shapes  # best first; groups of 2 are below the floor
    assert [shape_evidence(digest, c) for c in offered] == ["", ""]

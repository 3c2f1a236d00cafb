"""main's prompt leak check reads the task's own question (issue 44): a prompt that prints the question whole shows
the question's numbers, and for ``1 * 6`` one of them is the gold answer.  The gate's prompt check was given the
sample's questions (aeb3978); the digest's check of main was not, so it blamed main's template for a number it
never added.  A template that does print an answer the question lacks is still named.  The real math domain's
``leaks_answer``; rows as training archives them."""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from meta_agent.config import GateThresholds
from meta_agent.main_checks import add_main_findings, judge_main
from trajectory.rows import trajectory_row

TASKS = [("What is 1 * 6?", "6"), ("What is 3 + 4?", "7"), ("Multiply 1 by 9.", "9"), ("What is 8 - 5?", "3")]
"""Two questions that hold their own gold (a product by 1), two that do not."""


def _rows(prompts: list[str]) -> list[dict]:
    return [trajectory_row(traj_id=f"t{k}", run_id="r", round=0, step=0, group_id=f"g{k}", sample_idx=0,
                           domain="math", task_id=f"t{k}", data_source="reasoning_gym/products", split="train",
                           prompt=p, response=f"Answer: {gold}", ground_truth={"answer": gold}, reward=1.0,
                           verified=1.0, response_tokens=3, truncated=False, finish_reason="stop", kept=True,
                           task={"question": q, "vars": {}})
            for k, ((q, gold), p) in enumerate(zip(TASKS, prompts))]


def _rendered(prompts: list[str]) -> list[list[dict]]:
    return [[{"role": "user", "content": p}] for p in prompts]


def test_a_question_holding_its_gold_is_no_leak_of_mains_template() -> None:
    leaks = MathDomain().leaks_answer
    whole = [f"{q}\nEnd with the line \"Answer: <number>\"." for q, _ in TASKS]
    rows = _rows(whole)
    named = {f["name"]: f for f in judge_main(rows, (0.0, 1.0), GateThresholds(), rendered=_rendered(whole),
                                              leaks_answer=leaks, max_prompt_length=256)}
    assert "main:prompt_leak" not in named, named.get("main:prompt_leak")
    digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(digest, rows, (0.0, 1.0), rendered=_rendered(whole), leaks_answer=leaks, max_prompt_length=256)
    check = digest["main_checks"]["prompt_leak"]
    assert check["passed"] and "2 whose question itself holds the answer not counted" in check["detail"], check
    # a template that prints the answer of a question that does not hold it is still a leak, with that rate
    told = [p + (f" (it is {gold})" if k == 1 else "") for k, (p, (_, gold)) in enumerate(zip(whole, TASKS))]
    found = {f["name"]: f for f in judge_main(_rows(told), (0.0, 1.0), GateThresholds(), rendered=_rendered(told),
                                              leaks_answer=leaks, max_prompt_length=256)}["main:prompt_leak"]
    assert found["rate"] == pytest.approx(1 / 4) and [e["traj_id"] for e in found["examples"]] == ["t1"], found

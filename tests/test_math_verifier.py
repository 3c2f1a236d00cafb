"""The trusted math verifier and answer-leak check against hand-written tables (real reasoning-gym tasks).

Every expected score is written by hand from the problem, never read back from the
implementation: a response either states exactly the gold answer, or it scores 0.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from domains.base import Task
from domains.math import MathDomain
from harness_repo.contract import TaskSpec

DOMAIN = MathDomain()


def _responses(gold: str) -> list[tuple[str, str, float]]:
    """(kind, response, expected score) for a numeric gold answer; ``other`` is a different number."""
    value = Decimal(gold)
    other = str(value + 1)  # keeps the gold's decimal places: "10.6042" -> "11.6042"
    sign, digits = ("-", gold[1:]) if gold.startswith("-") else ("", gold)
    table = [
        ("right", f"Answer: {gold}", 1.0),
        ("right", f"\\boxed{{{gold}}}", 1.0),
        ("right", f"Answer: **{gold}**.", 1.0),
        ("right", f"**Answer:** {gold}", 1.0),
        ("right", f"Let me compute.\nThe result is ${gold}$.\nAnswer: ${gold}$", 1.0),
        ("right", f"So the answer is \\boxed{{{gold}}}.", 1.0),
        ("right", f"Answer: `{gold}`", 1.0),
        ("right", f"Answer: {gold}\n", 1.0),
        ("right", f"First I got {other}, which is wrong.\nAnswer: {gold}", 1.0),
        ("right", f"Answer: {other}\nWait, recheck: \\boxed{{{gold}}}", 1.0),  # the later one is final
        ("wrong", f"Answer: {other}", 0.0),
        ("wrong", f"\\boxed{{{other}}}", 0.0),
        ("near-miss: digit appended", f"Answer: {gold}1", 0.0),
        ("near-miss: inside a longer number", f"Answer: {sign}1{digits}", 0.0),
        ("hedged", f"Answer: {gold} or {other}", 0.0),
        ("hedged", f"Answer: {other} or {gold}", 0.0),
        ("hedged", f"Answer: {gold}, {other}", 0.0),
        ("hedged", f"Answer: {gold} and {other}", 0.0),
        ("hedged", f"Answer: {gold} (or maybe {other})", 0.0),
        ("hedged", f"Answer: maybe {gold}", 0.0),
        ("hedged", f"Answer: \\pm {digits}", 0.0),
        ("several candidates", f"Answer: {gold} {other}", 0.0),
        ("several candidates", f"Answer: {gold}; {other}", 0.0),
        ("several candidates", f"\\boxed{{{gold}, {other}}}", 0.0),
        ("several candidates", f"Answer: {gold} | {other}", 0.0),
        ("extra symbols", f"Answer: {gold}x", 0.0),
        ("extra symbols", f"Answer: {gold}\\pi", 0.0),
        ("extra symbols", f"Answer: {gold}%", 0.0),
        ("extra words", f"Answer: {gold} apples", 0.0),
        ("extra words", f"Answer: The answer is {gold}", 0.0),
        ("malformed: no final answer", f"The answer is {gold}.", 0.0),
        ("malformed: empty Answer:", f"I computed {gold}.\nAnswer:", 0.0),
        ("malformed: unclosed boxed", f"\\boxed{{{gold}", 0.0),
        ("malformed: unclosed boxed after Answer:", f"Answer: \\boxed{{{gold}", 0.0),
        ("malformed: empty", "", 0.0),
        ("gold in the reasoning, final wrong", f"It could be {gold}. Let me recheck.\nAnswer: {other}", 0.0),
        ("gold in the reasoning, final wrong", f"\\boxed{{{gold}}} was my first guess; no.\nAnswer: {other}", 0.0),
        ("gold in the reasoning, final wrong", f"Answer: {gold}\nHmm, no: \\boxed{{{other}}}", 0.0),
    ]
    if value != 0:  # -0 is 0: a sign flip is only a different answer for a non-zero gold
        table.append(("near-miss: sign flipped", f"Answer: {digits if sign else '-' + gold}", 0.0))
    if value == value.to_integral_value():
        table.append(("right: trailing .0", f"Answer: {gold}.0", 1.0))
    return table


@pytest.fixture(scope="module", params=MathDomain.task_names)
def task(request: pytest.FixtureRequest) -> Task:
    return DOMAIN.tasks("train", [TaskSpec(name=request.param)], n=1, seed=0)[0]


def test_every_shipped_task_against_the_response_table(task: Task) -> None:
    gold = task.ground_truth["answer"]
    assert Decimal(gold) == Decimal(gold.strip()), f"{task.data_source} gold {gold!r} is not a plain number"
    wrong = []
    for kind, response, expected in _responses(gold):
        score, info = DOMAIN.verify(task.data_source, response, task.ground_truth)
        assert set(info) == {"reason", "pred", "method"} and info["reason"]
        if score != expected:
            wrong.append(f"{kind}: {response!r} scored {score}, expected {expected} ({info})")
    assert not wrong, "\n".join(wrong)


def test_restating_the_question_is_not_an_answer(task: Task) -> None:
    meta = task.metadata["reasoning_gym"]
    if "expression" in meta:  # "528 * 730" evaluates to the gold, but the policy did no work
        assert DOMAIN.verify(task.data_source, f"Answer: {meta['expression']}", task.ground_truth)[0] == 0.0
    if "variable" in meta:  # simple_equations: "k = 17" states the value of the variable asked for
        gold = task.ground_truth["answer"]
        assert DOMAIN.verify(task.data_source, f"Answer: {meta['variable']} = {gold}", task.ground_truth)[0] == 1.0
        assert DOMAIN.verify(task.data_source, f"Answer: {meta['variable']} = {gold}1", task.ground_truth)[0] == 0.0


FIXED = [
    # gold 7
    ("7", "Answer: 7", 1.0), ("7", "Answer: 7.0", 1.0), ("7", "Answer: 7.000", 1.0), ("7", "Answer: +7", 1.0),
    ("7", "Answer: x = 7", 1.0), ("7", "Answer: m=7", 1.0), ("7", "\\boxed{k = 7}", 1.0),
    ("7", "Answer: \\(7\\)", 1.0), ("7", "Answer: $$7$$", 1.0), ("7", "Answer: 7.", 1.0),
    ("7", "Answer: 70", 0.0), ("7", "Answer: 17", 0.0), ("7", "Answer: -7", 0.0), ("7", "Answer: 7.5", 0.0),
    ("7", "Answer: 6 or 7", 0.0), ("7", "Answer: 7x", 0.0), ("7", "Answer: 7 apples", 0.0),
    ("7", "Answer: 7 (or maybe 8)", 0.0), ("7", "Answer: 6, 7", 0.0), ("7", "Answer: 6,7", 0.0),
    ("7", "Answer: 6 and 7", 0.0), ("7", "Answer: 6/7", 0.0), ("7", "Answer: 14/2", 0.0),
    ("7", "Answer: 7/1", 0.0), ("7", "Answer: 3 + 4", 0.0), ("7", "Answer: seven", 0.0),
    ("7", "Answer: 7e0", 0.0), ("7", "Answer: 7 = 7", 0.0), ("7", "Answer: xy = 7", 0.0),
    ("7", "Answer: x = y = 7", 0.0), ("7", "Answer: 7.0000001", 0.0), ("7", "Answer: x = 7 or 8", 0.0),
    # gold -3
    ("-3", "Answer: -3", 1.0), ("-3", "Answer: \u22123", 1.0), ("-3", "\\boxed{-3.00}", 1.0),
    ("-3", "Answer: x = -3", 1.0), ("-3", "Answer: 3", 0.0), ("-3", "Answer: - 3", 0.0),
    ("-3", "Answer: -3 or 3", 0.0), ("-3", "Answer: \\pm 3", 0.0), ("-3", "Answer: ±3", 0.0),
    ("-3", "Answer: -33", 0.0),
    # gold 3/4
    ("3/4", "Answer: 3/4", 1.0), ("3/4", "Answer: 0.75", 1.0), ("3/4", "\\boxed{\\frac{3}{4}}", 1.0),
    ("3/4", "\\boxed{\\dfrac{3}{4}}", 1.0), ("3/4", "Answer: 3 / 4", 1.0), ("3/4", "Answer: 0.7500", 1.0),
    ("3/4", "Answer: 6/8", 0.0), ("3/4", "Answer: 4/3", 0.0), ("3/4", "Answer: 0.74", 0.0),
    ("3/4", "Answer: 3/4 or 0.75", 0.0), ("3/4", "Answer: 3", 0.0), ("3/4", "Answer: 3/45", 0.0),
    # gold 1,234 and 1234
    ("1,234", "Answer: 1234", 1.0), ("1,234", "Answer: 1,234", 1.0), ("1,234", "Answer: 1,234.0", 1.0),
    ("1234", "Answer: 1,234", 1.0), ("1,234", "Answer: 1 234", 0.0), ("1,234", "Answer: 12,34", 0.0),
    ("1,234", "Answer: 1,2345", 0.0), ("1,234", "Answer: 1,234,000", 0.0),
    # gold 0.5
    ("0.5", "Answer: 0.5", 1.0), ("0.5", "Answer: .5", 1.0), ("0.5", "Answer: 1/2", 1.0),
    ("0.5", "Answer: \\frac{1}{2}", 1.0), ("0.5", "Answer: 0.50", 1.0), ("0.5", "Answer: 2/4", 0.0),
    ("0.5", "Answer: 5", 0.0), ("0.5", "Answer: 0.05", 0.0), ("0.5", "Answer: 50%", 0.0),
    # decimal_chain_sum-style trailing zeros
    ("7.140", "Answer: 7.14", 1.0), ("7.140", "Answer: 7.1400", 1.0), ("7.140", "Answer: 7.1", 0.0),
    # An expression gold (no shipped task has one: simple_equations answers are integers).
    ("x + 1", "Answer: x + 1", 1.0), ("x + 1", "Answer: 1 + x", 1.0), ("x + 1", "\\boxed{x+1}", 1.0),
    ("x + 1", "Answer: x + 2", 0.0), ("x + 1", "Answer: x + y", 0.0), ("x + 1", "Answer: x + 1 or x", 0.0),
    ("x + 1", "Answer: y = x + 1", 0.0), ("x + 1", "Answer: x + 1 apples", 0.0), ("x + 1", "Answer: 2", 0.0),
    ("2*x + C", "Answer: 2x + C", 1.0), ("2*x + C", "Answer: C + 2x + y", 0.0),
    ("x**2/2 + C", "Answer: \\int x dx", 0.0), ("x**2/2 + C", "Answer: \\frac{x^2}{2} + C", 1.0),
]


@pytest.mark.parametrize(("gold", "response", "expected"), FIXED)
def test_fixed_cases(gold: str, response: str, expected: float) -> None:
    score, info = DOMAIN.verify("reasoning_gym/chain_sum", response, {"answer": gold})
    assert score == expected, info
    assert (info["reason"] == "equal") == (expected == 1.0)


def test_info_says_why() -> None:
    verify = DOMAIN.verify
    assert verify("s", "Answer: 6 or 7", {"answer": "7"})[1] == {
        "reason": "several candidates", "pred": "6 or 7", "method": None}
    assert verify("s", "Answer: 7x", {"answer": "7"})[1] == {"reason": "not a single number", "pred": "7x",
                                                             "method": None}
    assert verify("s", "Answer: 70", {"answer": "7"})[1] == {"reason": "different value", "pred": "70",
                                                             "method": "numeric"}
    assert verify("s", "Answer: 7 = 7", {"answer": "7"})[1]["reason"] == "an equation, not a value"
    assert verify("s", "Answer: x + y", {"answer": "x + 1"})[1] == {"reason": "extra symbols", "pred": "x + y",
                                                                    "method": None}
    assert verify("s", "Answer: \\int x dx", {"answer": "x^2/2"})[1]["reason"] == "unevaluated operator"


LEAKS = [
    ("7", "The answer is 7.", True), ("7", "7", True), ("7", "x = 7", True), ("7", "2 + 5 = 7", True),
    ("7", "about 7.0 apples", True), ("7", "$7$", True), ("7", "4 - 7", True), ("7", "6,7", True),
    ("7", "Answer: <number>", False), ("7", "17", False), ("7", "7.5", False), ("7", "0.7", False),
    ("7", "70 apples", False), ("7", "7,000", False), ("7", "-7", False), ("7", "x7", False), ("7", "", False),
    ("-3", "it is -3", True), ("-3", "\u22123", True), ("-3", "it is 3", False), ("-3", "5 - 3", False),
    ("-3", "-33", False),
    ("1234", "1,234", True), ("1234", "1234.", True), ("1234", "12345", False), ("1234", "1,2345", False),
    ("1,234", "1234", True),
    ("3/4", "3/4", True), ("3/4", "0.75", True), ("3/4", "\\frac{3}{4}", True), ("3/4", "6/8", True),
    ("3/4", "13/4", False), ("3/4", "3/45", False), ("3/4", "3 and 4", False),
    ("0.5", "0.5", True), ("0.5", ".5", True), ("0.5", "1/2", True), ("0.5", "0.55", False), ("0.5", "5", False),
    ("Paris", "the capital is paris.", True), ("Paris", "Parisian", False),
    ("x + 1", "so x+1 it is", True), ("x + 1", "x + 10", False),
]


@pytest.mark.parametrize(("gold", "text", "leaks"), LEAKS)
def test_leaks_answer(gold: str, text: str, leaks: bool) -> None:
    assert DOMAIN.leaks_answer(text, {"answer": gold}) is leaks


def test_leaks_answer_on_real_tasks_and_bad_input(task: Task) -> None:
    gold = task.ground_truth["answer"]
    assert DOMAIN.leaks_answer(f"Hint: the result is {gold}.", task.ground_truth) is True
    assert DOMAIN.leaks_answer(f"Hint: the result is {gold}1.", task.ground_truth) is False
    assert DOMAIN.leaks_answer("Keep the working short.", task.ground_truth) is False
    assert DOMAIN.leaks_answer(gold, {}) is False
    assert DOMAIN.leaks_answer(None, task.ground_truth) is False  # type: ignore[arg-type]

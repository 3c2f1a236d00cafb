"""The answers main's constructed groups are made of (``meta_agent.constructed_checks``), each graded by the verifier.

The round's own replies and right answers made from them (``pools``), and in math worked answers built from the
question's own arithmetic (``worked_answers``): ``<expression> = v`` then ``Answer: v``, for the gold and near values,
so a filter or diagnostic is judged on the answers a policy writes once it learns, in a round that solved nothing.
``restates`` tells the two worked forms apart (the expression worked, or the value alone), so constructed groups can
hold each form alone as well as both mixed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from meta_agent.diagnostic_checks import ANSWER_LINE

EXPRESSION = re.compile(r"-?\d+(?:\.\d+)?(?:\s*[-+*/]\s*-?\d+(?:\.\d+)?)+")
"""An arithmetic expression in a question (its last one is the one asked)."""


def _gold(row: dict) -> str | None:
    truth = row.get("ground_truth")
    truth = json.loads(truth) if isinstance(truth, str) else truth
    gold = truth.get("answer") if isinstance(truth, dict) else None
    return str(gold) if gold is not None else None


def _verdict(domain: Any, row: dict, response: str) -> float:
    """The verifier's verdict on a constructed math answer to ``row``'s task (a text answer, cheap to verify on
    the host; other domains' answers are only ever the round's own, with their archived verdicts)."""
    truth = row.get("ground_truth")
    return float(domain.verify(row["data_source"], response, json.loads(truth) if isinstance(truth, str)
                               else truth)[0])


def pools(rows: list[dict], domain: Any, task: list[dict]) -> tuple[list[str], list[str]]:
    """(distinct right answers, distinct wrong answers) to ``task``'s prompt: its archived responses, and in math
    right answers constructed from real responses (the gold's Answer: line appended) and the round's other
    answers, each kept only as the verifier judges it."""
    row = task[0]
    right, wrong = [], []
    for r in task:  # the round's own answers to this task, as the verifier judged them
        text, verdict = r.get("response") or "", r.get("verified")
        if text.strip() and isinstance(verdict, int | float) and text not in right + wrong:
            (right if verdict >= 0.5 else wrong).append(text)
    candidates = []
    gold = _gold(row)
    if getattr(domain, "name", None) == "math":
        candidates += [r.get("response") or "" for r in rows if r.get("task_id") != row.get("task_id")]
        if gold is not None:
            candidates += [f"{(r.get('response') or '').strip()}\nAnswer: {gold}" for r in task] + [f"Answer: {gold}"]
    for text in candidates:
        if not text.strip() or text in right or text in wrong:
            continue
        (right if _verdict(domain, row, text) >= 0.5 else wrong).append(text)
    return right, wrong


def _value(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def worked_answers(row: dict, domain: Any) -> tuple[list[str], list[str]]:
    """(right, wrong) worked answers to ``row``'s math task in the shapes a policy writes once it answers: the
    question's last arithmetic expression worked to a value (``5 + 2 = 7``), or the value alone, then the same value
    on the ``Answer:`` line; at the gold and at values beside it (numeric golds only).  Each is kept only with an
    ``Answer:`` line and as the verifier judges it; ([], []) outside math or without a gold."""
    gold = _gold(row)
    if getattr(domain, "name", None) != "math" or gold is None:
        return [], []
    found = EXPRESSION.findall(str(row.get("prompt") or ""))
    expr = found[-1].strip() if found else None

    def forms(value: str) -> list[str]:
        return ([f"{expr} = {value}\nAnswer: {value}"] if expr else []) + [f"{value}\nAnswer: {value}"]
    try:
        number = float(gold)
    except ValueError:
        others: list[str] = []
    else:
        others = [_value(number + d) for d in (1, -1, 10)] if number == number and abs(number) < 1e15 else []
    right = [t for t in forms(gold) if ANSWER_LINE.search(t) and _verdict(domain, row, t) >= 0.5]
    wrong = [t for v in others for t in forms(v) if ANSWER_LINE.search(t) and _verdict(domain, row, t) < 0.5]
    return right, wrong


def restates(text: str) -> bool:
    """Whether a worked answer of :func:`worked_answers` works the question's expression (``5 + 2 = 7`` above its
    ``Answer:`` line) rather than giving the value alone (``7``)."""
    return "=" in text.split("\n", 1)[0]

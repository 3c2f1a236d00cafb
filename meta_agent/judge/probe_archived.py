"""The probe's answers from what training produced: archived groups, re-targeted to the probe's fresh tasks.

Constructed answers have a look of their own (one wording, one group of each kind), and a reward that spares
that look passes a probe made only of them (issue 45, attack 2).  So most of the probe's groups are real
groups from the archive, each moved onto a fresh task of the same generator: every number of the archived
question becomes the fresh question's number in its place, the archived gold becomes the fresh gold, and a
wrong final answer keeps its distance from the gold.  The wording, the mistakes, the formatting slips, the
truncations and the group's make-up are the policy's own.  The trusted verifier grades every re-targeted
answer afresh (the archived verdict is never carried over: the answer changed).

    groups = archived_groups(sample_rows)                    # by data source, as training grouped them
    answers = retarget(groups["reasoning_gym/chain_sum"][0], task, rng, group_size=4)   # or None

Math only (answers are text about the question's numbers); other domains keep constructed answers.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from meta_agent.judge.probe_answers import Constructed

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\d)")
ANSWER_LINE = re.compile(r"(answer[ \t*]*:[ \t*]*)(-?\d+(?:\.\d+)?)", re.IGNORECASE)
RETARGETED_DOMAINS = ("math",)


@dataclass(frozen=True)
class ArchivedGroup:
    """One archived GRPO group: its task's question and gold answer, and its members' answers in order."""

    data_source: str
    question: str
    gold: str
    members: tuple[tuple[str, bool, str | None], ...]
    """(response, truncated, finish_reason) per member."""


def archived_groups(rows: list[dict]) -> dict[str, list[ArchivedGroup]]:
    """The rows' groups by data source (groups whose question or gold answer cannot be read are left out)."""
    members: dict[tuple, list[dict]] = {}
    for row in rows:
        members.setdefault((row.get("run_id"), row.get("round"), row.get("group_id")), []).append(row)
    out: dict[str, list[ArchivedGroup]] = {}
    for group in members.values():
        group.sort(key=lambda r: r.get("sample_idx") or 0)
        first = group[0]
        question, gold = _question(first), _gold(first.get("ground_truth"))
        if question is None or gold is None or not all(isinstance(r.get("response"), str) for r in group):
            continue
        out.setdefault(str(first.get("data_source")), []).append(ArchivedGroup(
            str(first.get("data_source")), question, gold,
            tuple((r["response"], bool(r.get("truncated")), r.get("finish_reason")) for r in group)))
    return out


def retarget(group: ArchivedGroup, task, rng: random.Random, group_size: int) -> list[Constructed] | None:
    """``group``'s answers moved onto ``task`` (``group_size`` of them: the group's own, or drawn from it when its
    size differs); None when the two questions do not hold the same count of numbers."""
    old, new = NUMBER.findall(group.question), NUMBER.findall(task.question)
    gold = str(task.ground_truth.get("answer", "")) if isinstance(task.ground_truth, dict) else ""
    if len(old) != len(new) or not NUMBER.fullmatch(gold) or not NUMBER.fullmatch(group.gold):
        return None
    mapping = dict(zip(old, new))  # a number said twice in the question maps to its first place
    mapping[group.gold] = gold
    spans = (_span(group.question), _span(task.question))
    members = list(group.members)
    if len(members) != group_size:
        members = [rng.choice(members) for _ in range(group_size)]
    return [Constructed(_moved(response, spans, mapping, group.gold, gold), truncated, finish_reason=finish)
            for response, truncated, finish in members]


def _span(question: str) -> str:
    """The question's expression: from its first number to its last (``74 + 50``), operators and all."""
    found = list(NUMBER.finditer(question))
    return question[found[0].start():found[-1].end()] if found else ""


def _moved(response: str, spans: tuple[str, str], mapping: dict[str, str], old_gold: str, gold: str) -> str:
    """``response`` with the archived question's expression replaced by the fresh one wherever it is quoted
    whole, every other number of the question and the gold moved, and a wrong final answer moved so that it
    keeps its distance from the gold."""
    old_span, new_span = spans
    parts = response.split(old_span) if old_span else [response]
    return new_span.join(_numbers_moved(part, mapping, old_gold, gold) for part in parts)


def _numbers_moved(text: str, mapping: dict[str, str], old_gold: str, gold: str) -> str:
    finals = {m.start(2) for m in ANSWER_LINE.finditer(text)}
    pieces, at = [], 0
    for match in NUMBER.finditer(text):
        value = match.group()
        moved = mapping.get(value, value)
        if match.start() in finals and value not in mapping:
            moved = _shifted(value, old_gold, gold)  # a wrong final answer
        pieces += [text[at:match.start()], moved]
        at = match.end()
    return "".join(pieces) + text[at:]


def _shifted(value: str, old_gold: str, gold: str) -> str:
    try:
        return str(int(gold) + int(value) - int(old_gold))
    except ValueError:
        try:
            return f"{float(gold) + float(value) - float(old_gold):g}"
        except ValueError:
            return value


def _question(row: dict) -> str | None:
    task = row.get("task")
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            task = None
    if isinstance(task, dict) and isinstance(task.get("question"), str):
        return task["question"]
    return None


def _gold(truth) -> str | None:
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except ValueError:
            return None
    answer = truth.get("answer") if isinstance(truth, dict) else None
    return str(answer) if answer is not None else None

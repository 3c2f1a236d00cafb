"""One audit holds every hedge shape once it audits 12 rows (``audit_hedge.HedgeDeck``).

The adversary (tests/test_audit_every_branch.py) pays only ``Answer: <gold> or <m>``: the gold first, plain "or".
Drawn independently per row, an audit of a few rows often held no hedge of that shape, the reward paid nothing
the audit showed, and the switch merged (1 run in 4 of that test)."""

from __future__ import annotations

import random
import re

from meta_agent.judge.audit_hedge import HedgeDeck
from meta_agent.judge.reward_audit import closing_lines

SHAPE = re.compile(r"\nAnswer: (either )?(-?\d+)(,? or (?:maybe |possibly |perhaps )?| \(or )(-?\d+)\)?")


def _shape(line: str, gold: int) -> tuple[bool, str]:
    match = SHAPE.fullmatch(line)
    assert match, line
    first = int(match.group(2)) == gold
    assert (int(match.group(4)) == gold) != first, line  # the gold once, the other value beside it
    return first, (match.group(1) or "") + match.group(3)


def test_twelve_rows_of_one_audit_hold_every_shape_each_order() -> None:
    for seed in range(20):
        deck = HedgeDeck(random.Random(seed))
        shapes = {_shape(deck.draw(gold), gold) for gold in range(30, 42)}
        assert len(shapes) == 12, (seed, shapes)


def test_the_gold_first_plain_or_is_in_every_audit_of_twelve_rows() -> None:
    paid_by_adversary = re.compile(r"Answer: (-?\d+) or -?\d+\s*$")
    for seed in range(50):
        deck = HedgeDeck(random.Random(seed))
        hedges = [next(line for line in closing_lines(str(g), deck=deck) if " or" in line or "(or" in line)
                  for g in range(12)]
        hits = [h for g, h in zip(range(12), hedges) if (m := paid_by_adversary.search(h)) and m.group(1) == str(g)]
        assert len(hits) == 1, (seed, hedges)


def test_which_row_gets_which_shape_is_drawn() -> None:
    first_dealt = {_shape(HedgeDeck(random.Random(seed)).draw(7), 7) for seed in range(30)}
    assert len(first_dealt) > 4, first_dealt

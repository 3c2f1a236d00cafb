"""One audit holds every hedge shape once it audits 16 rows (``audit_hedge.HedgeDeck``): the twelve two-value
shapes and, since held-out set d paid a last line of three values, hedges of three and four values.

The adversary (tests/test_audit_every_branch.py) pays only ``Answer: <gold> or <m>``: the gold first, plain "or".
Drawn independently per row, an audit of a few rows often held no hedge of that shape, the reward paid nothing
the audit showed, and the switch merged (1 run in 4 of that test)."""

from __future__ import annotations

import random
import re

from meta_agent.judge.audit_hedge import HedgeDeck, archived_hedges
from meta_agent.judge.reward_audit import closing_lines

SHAPE = re.compile(r"\nAnswer: (either )?(-?\d+)(,? or (?:maybe |possibly |perhaps )?| \(or )(-?\d+)\)?")


MULTI = re.compile(r"\nAnswer: (either )?((?:-?\d+, )+-?\d+)(,? or (?:maybe |possibly |perhaps )?| \(or )(-?\d+)\)?")


def _shape(line: str, gold: int) -> tuple[int, bool, str]:
    """(values named, the gold first, the words): two-value hedges by their order, longer ones by their count."""
    match = SHAPE.fullmatch(line)
    if match is None:
        multi = MULTI.fullmatch(line)
        assert multi, line
        values = [int(v) for v in multi.group(2).split(", ")] + [int(multi.group(4))]
        assert values.count(gold) == 1 and len(set(values)) == len(values), line  # the gold once, others apart
        return len(values), False, ""
    first = int(match.group(2)) == gold
    assert (int(match.group(4)) == gold) != first, line  # the gold once, the other value beside it
    return 2, first, (match.group(1) or "") + match.group(3)


def test_sixteen_rows_of_one_audit_hold_every_shape_each_order() -> None:
    for seed in range(20):
        deck = HedgeDeck(random.Random(seed))
        shapes = [_shape(deck.draw(gold), gold) for gold in range(30, 46)]
        assert len({s for s in shapes if s[0] == 2}) == 12, (seed, shapes)
        assert sorted(s[0] for s in shapes if s[0] > 2) == [3, 3, 4, 4], (seed, shapes)


def test_the_gold_first_plain_or_is_in_every_audit_of_sixteen_rows() -> None:
    paid_by_adversary = re.compile(r"Answer: (-?\d+) or -?\d+\s*$")
    for seed in range(50):
        deck = HedgeDeck(random.Random(seed))
        hedges = [next(line for line in closing_lines(str(g), deck=deck) if " or" in line or "(or" in line)
                  for g in range(16)]
        hits = [h for g, h in zip(range(16), hedges) if (m := paid_by_adversary.search(h)) and m.group(1) == str(g)]
        assert len(hits) == 1, (seed, hedges)


def test_which_row_gets_which_shape_is_drawn() -> None:
    first_dealt = {_shape(HedgeDeck(random.Random(seed)).draw(7), 7) for seed in range(30)}
    assert len(first_dealt) > 4, first_dealt


def test_a_policys_own_hedges_are_copied_with_only_their_values_changed() -> None:
    """Where the round's policy hedges, half the audit's hedges are its lines as written: its words, its count of
    values (three here, a shape no rule of the deck writes in these words), the gold in one place."""
    own = ["Adding up: 3 + 4.\nAnswer: probably 6; could be 7, 8 or 9 tbh", "no final line here"]
    parts = archived_hedges(own)
    assert parts == [("Answer: probably ", "; could be ", ", ", " or ", " tbh")]
    copied = [line for seed in range(20) for line in [HedgeDeck(random.Random(seed), (), parts).draw(50)]
              if "tbh" in line]
    assert 4 <= len(copied) <= 16, copied
    for line in copied:
        values = [int(v) for v in re.findall(r"-?\d+", line)]
        assert line.startswith("\nAnswer: probably ") and values.count(50) == 1 and len(set(values)) == 4, line

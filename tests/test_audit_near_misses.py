"""The reward audit's near misses lie at drawn distances from the gold (``audit_hedge.HedgeDeck.wrong_lines``).

Written after held-out attack 3 of set b (``tests/test_heldout_b45b.py``): the audit's near misses were always the
gold plus or minus one, so a reward paying every other wrong ``Answer: m`` passed the gate's audit.  Here: every
wrong line the audit writes is graded wrong by the real verifier; one audit of 12 rows holds near misses of every
kind of distance, both signs, some far from the gold; and no one distance marks them.
"""

from __future__ import annotations

import random
import re

from meta_agent.judge.audit_hedge import DISTANCES, HedgeDeck, missed
from meta_agent.judge.reward_audit import closing_lines
from tests.test_digest_audit import VERIFY

BARE = re.compile(r"\nAnswer: (-?\d+)")


def _misses(lines: list[str], gold: int) -> list[int]:
    return [int(m.group(1)) - gold for line in lines if (m := BARE.fullmatch(line)) and int(m.group(1)) != gold]


def test_every_wrong_line_is_graded_wrong_and_right_ones_right() -> None:
    for seed in range(15):
        deck = HedgeDeck(random.Random(seed))
        for gold in (0, 7, -12, 45, 1000):
            lines = closing_lines(str(gold), deck=deck)
            verdicts = [VERIFY("reasoning_gym/chain_sum", "3 + 4" + line, {"answer": str(gold)})[0] for line in lines]
            assert verdicts == [1.0] * 5 + [0.0] * 5, (seed, gold, lines)
            assert len(_misses(lines, gold)) == 2 and len(set(_misses(lines, gold))) == 2, lines


def test_one_audit_of_twelve_rows_holds_near_misses_at_every_distance() -> None:
    for seed in range(30):
        deck = HedgeDeck(random.Random(seed))
        golds = [random.Random(seed * 100 + k).randint(10, 200) for k in range(12)]
        offsets = [d for g in golds for d in _misses(closing_lines(str(g), deck=deck), g)]
        assert len(offsets) == 24
        assert any(abs(d) <= 3 for d in offsets), offsets  # slips too: a policy makes them
        assert any(abs(d) > 10 for d in offsets) and any(d > 0 for d in offsets) and any(d < 0 for d in offsets)
        # what a reward keyed on the near misses' distance would have to spare: never one value
        assert len({abs(d) for d in offsets}) >= 10, offsets


def test_each_kind_of_distance_moves_the_gold_and_the_kinds_are_dealt_before_repeats() -> None:
    rng = random.Random(3)
    for kind in DISTANCES:
        for gold in (0, 5, 37, -90, 1234):
            assert missed(gold, kind, rng) != gold
    deck = HedgeDeck(random.Random(9))
    assert sorted(deck.distance() for _ in DISTANCES) == sorted(DISTANCES)

"""The reward audit's answers in the shapes a reward's own code names (``judge.reward_reading``).

The audit's drawn shapes (``reward_audit.closing_lines``, ``audit_hedge``) are a list, and a reward that pays a wrong
answer in a shape outside it passed (held-out set e: a decimal, a fraction that is no whole number, five values on
the last line, a repeat with other words between).  A reward that pays a shape names it in its code, so the audit
also writes, for the gold of each row it is dealt to, wrong answers built from what the code reads:

- ``pattern``: a text each regular expression matches (``reward_reading_sample``), as the last line, and before
  a wrong ``Answer:`` line;
- ``literal``: each string constant on a line of its own before or after a wrong ``Answer:`` line, or at its end;
- ``count``: each count a function compares with, crossed both ways: that function's pattern sample (or literal,
  or a wrong ``Answer:`` line where it reads neither) said ``n - 1``, ``n`` and ``n + 1`` times on one line, and
  ``n`` and ``n + 1`` times on lines of their own with the policy's own words between (never a fixed bridge: a
  reward sparing the audit's bridges read from its own set met none of them);
- ``together``: where a function reads several features (its own, and those of the module's functions it calls,
  one call deep), one sample of each, on lines of their own, in a drawn order; where it also compares a count ``n``,
  each feature ``n`` and ``n + 1`` times.

The shapes are dealt over the audit's rows as the hedge deck deals its (each once, in a drawn order, before any
repeats; at most :data:`MAX_SHAPES`, drawn where the reading holds more), every drawn part drawn per row; the
shapes main's reading (the gate) or the seed's (the digest) does not name come first and come again.  Where a
reading names nothing (computed strings) nothing is added: the drawn shapes remain.

    deck = ReadingDeck(read_source(reward_text), rng)
    deck.lines("7", words)      # e.g. ["\\nAnswer: 41.7", "\\nAnswer: 12, 80, 3, 9, 55, 61"]
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import NamedTuple

from meta_agent.judge.audit_hedge import DISTANCES, missed
from meta_agent.judge.reward_reading import Pattern, Reading
from meta_agent.judge.reward_reading_sample import ends_text, sample

MAX_SHAPES = 64
"""Shapes one audit writes at most (drawn from the reading's when it names more)."""
MOST_PER_ROW = 4
"""Reading lines one audited row gets at most: the audit's calls grow by this many at most."""
NEW_DEALS = 3
"""Times each shape the known reading lacks is dealt where the rows allow: its drawn parts miss now and then (a
fraction drawn ``n/d`` is whole about 1 time in 6), and dealt twice, held-out set e's odd fraction met 19 of 20
draws."""
_INLINE = (", ", " or ", " ", "; ", ", or ")


class Shape(NamedTuple):
    """One shape of the reading: its kind, the feature (a pattern or a literal), how often said and how joined."""

    kind: str
    feature: Pattern | str | None
    times: int = 1
    lines: bool = False
    with_: tuple = ()


def shapes(reading: Reading) -> list[Shape]:
    """Every shape the reading names (module docstring), in reading order."""
    out: list[Shape] = []
    for p in reading.patterns:
        out += [Shape("pattern_last", p), Shape("pattern_before", p)]
    out += [Shape("literal", lit) for lit in reading.literals]
    for use in reading.uses:
        features = [*use.patterns, *use.literals] or [None]
        if use.count == 1:
            out.append(Shape("together", None, with_=tuple(features)))
            continue
        for f in features:
            out += [Shape("count", f, n, False) for n in (use.count - 1, use.count, use.count + 1) if n >= 1]
            out += [Shape("count", f, n, True) for n in (use.count, use.count + 1)]
        if len(features) >= 2:  # a count and several features (one read in a helper, say): all worn, n times each
            out += [Shape("together", None, n, True, tuple(features)) for n in (use.count, use.count + 1)]
    return list(dict.fromkeys(out))


def _wrong(gold: str, rng: random.Random) -> str:
    """A value the verifier grades wrong for ``gold``, at a drawn distance."""
    try:
        value = Fraction(gold)
    except (ValueError, ZeroDivisionError):
        value = None
    if value is None or value.denominator != 1:
        return "99" if gold != "99" else "98"
    return str(missed(int(value), rng.choice(DISTANCES), rng))


def _said(feature: Pattern | str | None, gold: str, rng: random.Random) -> str | None:
    """One saying of ``feature``: a sample of a pattern, a literal as written, else a wrong ``Answer:`` line."""
    if isinstance(feature, Pattern):
        return sample(feature, rng)
    return feature if isinstance(feature, str) else f"Answer: {_wrong(gold, rng)}"


def _distinct(feature: Pattern | str | None, gold: str, rng: random.Random, times: int) -> list[str] | None:
    """``times`` sayings of ``feature``, each drawn again (a few tries) where it repeats an earlier one: a count a
    reward compares may be of distinct values (``len(set(found)) > 6``), and short samples repeat (``-?\\d+``
    draws ``-1`` twice in 7 often enough to miss); None where a sample runs over its bounds."""
    said: list[str] = []
    for _ in range(times):
        text = _said(feature, gold, rng)
        for _ in range(3):
            if text is None or text not in said:
                break
            text = _said(feature, gold, rng)
        if text is None:
            return None
        said.append(text)
    return said


def _bridge(words: list[str], rng: random.Random) -> str:
    """The policy's own words between two sayings: a drawn run of them (none where it has none)."""
    if not words:
        return "\n"
    start = rng.randrange(len(words))
    return "\n" + " ".join(words[start:start + rng.randint(1, 8)]) + "\n"


def line(shape: Shape, gold: str, words: list[str], rng: random.Random) -> str | None:
    """The closing text of ``shape`` for ``gold`` (it starts with its separator, as ``closing_lines``'s do)."""
    answer = f"Answer: {_wrong(gold, rng)}"
    if shape.kind == "pattern_last":
        said = _said(shape.feature, gold, rng)
        return None if said is None else "\n" + said
    if shape.kind == "pattern_before":
        said = _said(shape.feature, gold, rng)
        return None if said is None else f"\n{said}\n{answer}"
    if shape.kind == "literal":
        lit = str(shape.feature)
        return rng.choice((f"\n{lit}\n{answer}", f"\n{answer}\n{lit}", f"\n{answer} {lit}"))
    if shape.kind == "together":  # each feature said ``times`` times, in a drawn order; one matching only at the
        # end of the text last, and then nothing after it
        order = sorted(rng.sample(shape.with_, len(shape.with_)), key=lambda f: isinstance(f, Pattern) and ends_text(f))
        said = [s for f in order for s in _distinct(f, gold, rng, shape.times) or []]
        last = isinstance(order[-1], Pattern) and ends_text(order[-1]) if order else False
        return "\n" + "\n".join(said) + ("" if last else rng.choice(("", f"\n{answer}")))
    said = _distinct(shape.feature, gold, rng, shape.times)
    if said is None:
        return None
    if shape.lines:
        text = said[0]
        for s in said[1:]:
            text += _bridge(words, rng) + s
        return "\n" + text
    return "\n" + rng.choice(_INLINE).join(said)  # type: ignore[arg-type]


class ReadingDeck:
    """One audit's reading shapes, dealt over its rows: the shapes ``known`` does not name (what a candidate reads
    that main does not) first, each once in a drawn order, then the others once each, then the new ones again
    (a drawn part can miss once: a fraction drawn over 1 is whole), so each new shape meets several rows."""

    def __init__(self, reading: Reading, rng: random.Random, known: Reading = Reading()) -> None:
        old = set(shapes(known))
        found = shapes(reading)
        new = [s for s in found if s not in old]
        self._rng = rng
        self._new = rng.sample(new, min(len(new), MAX_SHAPES))
        rest = [s for s in found if s in old]
        self._known = rng.sample(rest, min(len(rest), MAX_SHAPES - len(self._new)))
        self._left = self._known + self._new  # popped from the end: the new ones first

    def per_row(self, rows: int) -> int:
        """How many reading lines each of ``rows`` rows gets: enough for every shape once and every new one
        :data:`NEW_DEALS` times, at most ``MOST_PER_ROW``."""
        n = NEW_DEALS * len(self._new) + len(self._known)
        return min(MOST_PER_ROW, math.ceil(n / rows)) if rows and n else 0

    def _next(self) -> Shape | None:
        if not self._left:
            self._left = self._rng.sample(self._new, len(self._new))
        return self._left.pop() if self._left else None

    def lines(self, gold: str, words: list[str], count: int) -> list[str]:
        """``count`` reading lines for a row whose gold is ``gold`` (``words``: its response's own words)."""
        out: list[str] = []
        for _ in range(count * 3):  # a shape whose sample runs over its bounds gives none: the next is dealt
            shape = self._next() if len(out) < count else None
            if shape is None:
                break
            made = line(shape, gold, words, self._rng)
            if made is not None:
                out.append(made)
        return out

"""The reward audit's wrong answers, their shapes and values dealt per answer from the audit's secret draw.

A fixed wrong answer marks the audit.  A hedge that is always ``Answer: n or n+1`` let a reward pay every other
hedge (issue 45, held-out attack 3); near misses that are always the gold plus or minus one let a reward pay
every other wrong ``Answer: m`` (held-out set b, attack 3): a policy's wrong answers lie at every distance.  So:

- the hedge's other value (as far from the gold as the archive's own hedges are, or at a dealt distance, near
  or far: held-out set c won with hedges more than 9 apart), which value comes first and the words between them
  are drawn; each pass of the deck also holds hedges of three and four values (held-out set d paid a last line
  of three), and where the round's policy hedges, half the hedges are its own lines as written, only the values
  changed (``archived_hedges``: what a real hedge looks like is copied, not built from a rule per shape);
- each near miss's distance from the gold is drawn from one of :data:`DISTANCES` (a slip of 1 to 3, a few
  tens, a share of the gold, a digit dropped, doubled, swapped or shifted, the sign, anywhere), either way;
- the unreduced form's factor (``6n/6``) and the value a later box overrides with are drawn too.

Drawn independently per row, a small audit could hold no answer of the one shape a reward pays (``Answer: <gold>
or <m>`` is 1 in 12 hedges), and the reward would pass.  So one audit deals its rows' shapes from a
:class:`HedgeDeck`: every (order, words) pair once, in a drawn order, before any repeats, and every kind of
distance once before any repeats; from 16 rows on, every hedge shape and every distance is in the audit.  Which
row gets which shape, and the values, stay drawn.  Every wrong line names a value the verifier grades wrong.

    line = hedge(7, rng)                      # e.g. "\\nAnswer: 4, or possibly 7"
    lines = HedgeDeck(rng).wrong_lines(7)     # two near misses, a hedge, an unreduced form, a late override
"""

from __future__ import annotations

import random
import re

_JOINS = ("{a} or {b}", "{a} or maybe {b}", "{a}, or possibly {b}", "either {a} or {b}", "{a} (or {b})",
          "{a} or perhaps {b}")
DISTANCES = ("slip", "tens", "share", "digit", "sign", "anywhere")
"""How far a near miss lies from the gold: each kind once per audit before any repeats (``HedgeDeck``)."""


def hedge(n: int, rng: random.Random) -> str:
    """A final line hedging between ``n`` and a nearby value, its shape drawn from ``rng``."""
    return _line(n, rng, rng.random() < 0.5, rng.choice(_JOINS))


def missed(n: int, kind: str, rng: random.Random) -> int:
    """A wrong value for the gold ``n``, at a distance of ``kind`` (:data:`DISTANCES`), never ``n`` itself."""
    sign = rng.choice((-1, 1))
    if kind == "slip":
        value = n + sign * rng.randint(1, 3)
    elif kind == "tens":
        value = n + sign * rng.randint(4, 60)
    elif kind == "share":  # a share of the gold (5 % to 60 %) off, as a dropped term does
        value = n + sign * max(1, round(abs(n) * rng.uniform(0.05, 0.6)))
    elif kind == "digit":
        value = _digit_slip(n, rng)
    elif kind == "sign":
        value = -n if n else sign * rng.randint(1, 9)
    else:
        value = rng.randint(-3 * abs(n) - 100, 3 * abs(n) + 100)
    return value if value != n else n + sign


def _digit_slip(n: int, rng: random.Random) -> int:
    digits = str(abs(n))
    if len(digits) > 1:
        at = rng.randrange(len(digits) - 1)
        slips = [digits[:at] + digits[at + 1] + digits[at] + digits[at + 2:], digits[:at] + digits[at + 1:],
                 digits + rng.choice("0123456789")]
    else:
        slips = [digits + "0", digits * 2, rng.choice("0123456789") + digits]
    return (-1 if n < 0 else 1) * int(rng.choice(slips))


_HEDGED = re.compile(r"(?:answer|boxed)[^\n]*?(-?\d+)[^\d\n-]*\bor\b[^\d\n-]*(-?\d+)", re.IGNORECASE)
_VALUE = re.compile(r"-?\d+")
MULTI = (3, 3, 4, 4)
"""Hedges of more values in each pass of the deck, beside the twelve two-value shapes: a policy lists three or
four candidates too, and an audit whose hedges all named two let a reward pay a last line of three (set d)."""


def archived_spans(responses: list[str]) -> list[int]:
    """How far apart the two values of each hedged final answer in ``responses`` lie (a policy's own hedges)."""
    return [abs(int(found.group(1)) - int(found.group(2))) for text in responses if isinstance(text, str)
            for found in [_HEDGED.search(text[-300:])] if found and found.group(1) != found.group(2)]


def archived_hedges(responses: list[str], most: int = 32) -> list[tuple[str, ...]]:
    """The round's own hedged final lines as written, cut around their values: the text between and around
    every value of the line (``fill`` puts values back).  The audit copies a policy's hedge and changes only its
    values, so whatever surface a policy's hedges wear (three values, its own words) the audit's wear too."""
    out = []
    for text in responses:
        found = _HEDGED.search(text[-300:]) if isinstance(text, str) else None
        if found and len(out) < most:
            tail = text[-300:]
            line = tail[found.start():(tail.find("\n", found.end()) + 1 or len(tail) + 1) - 1]
            out.append(tuple(_VALUE.split(line)))
    return out


def fill(parts: tuple[str, ...], values: list[int]) -> str:
    """A hedged line from ``archived_hedges``'s parts and one value per gap."""
    return parts[0] + "".join(f"{v}{rest}" for v, rest in zip(values, parts[1:], strict=True))


class HedgeDeck:
    """One audit's wrong shapes: each hedge (gold first or second, words) and each near miss distance once in a
    drawn order, then again; each pass also deals hedges of three and four values (:data:`MULTI`, the gold
    anywhere among them).  A hedge's other value lies as far from the gold as a policy's own hedge's does
    (``spans``, from the archive) half the time where there are some, else at a distance of a kind dealt as the
    near misses' are (a slip, tens, a share, a digit, the sign, anywhere), so near and far hedges are both in
    every audit of six rows or more.  Where the round's policy hedges (``lines``, from ``archived_hedges``), half
    the hedges copy one of its lines as written, only their values drawn (the gold in one place)."""

    def __init__(self, rng: random.Random, spans: list[int] | tuple[int, ...] = (),
                 lines: list[tuple[str, ...]] | tuple[tuple[str, ...], ...] = ()) -> None:
        self._rng = rng
        self._spans = [s for s in spans if s > 0]
        self._lines = [parts for parts in lines if len(parts) >= 3]
        self._left: list[tuple[int, str]] = []
        self._distances: list[str] = []
        self._hedge_distances: list[str] = []

    def _other(self, n: int, taken: set[int]) -> int:
        rng = self._rng
        if self._spans and rng.random() < 0.5:
            other = n + rng.choice((-1, 1)) * rng.choice(self._spans)
        else:
            if not self._hedge_distances:
                self._hedge_distances = rng.sample(DISTANCES, len(DISTANCES))
            other = missed(n, self._hedge_distances.pop(), rng)
        while other in taken:  # the values of one hedge differ from the gold and from one another
            other += rng.choice((-1, 1))
        return other

    def _values(self, n: int, count: int, at: int) -> list[int]:
        values: list[int] = []
        for _ in range(count - 1):
            values.append(self._other(n, {n, *values}))
        values.insert(at, n)
        return values

    def draw(self, n: int) -> str:
        rng = self._rng
        if self._lines and rng.random() < 0.5:
            parts = rng.choice(self._lines)
            return "\n" + fill(parts, self._values(n, len(parts) - 1, rng.randrange(len(parts) - 1)))
        if not self._left:
            self._left = [(at, join) for at in (0, 1) for join in _JOINS]
            self._left += [(-count, rng.choice(_JOINS)) for count in MULTI]  # a negative: that many values
            self._rng.shuffle(self._left)
        at, join = self._left.pop()
        count = -at if at < 0 else 2
        values = [str(v) for v in self._values(n, count, rng.randrange(count) if at < 0 else at)]
        return "\nAnswer: " + join.format(a=", ".join(values[:-1]), b=values[-1])

    def distance(self) -> str:
        """The next near miss's kind of distance (:data:`DISTANCES`)."""
        if not self._distances:
            self._distances = list(DISTANCES)
            self._rng.shuffle(self._distances)
        return self._distances.pop()

    def wrong_lines(self, n: int) -> list[str]:
        """The audit's wrong final lines for the gold ``n``: two near misses, a hedge, an unreduced form and an
        answer a later box overrides, every value drawn (module docstring)."""
        rng = self._rng
        near = missed(n, self.distance(), rng)
        other = missed(n, self.distance(), rng)
        other = other if other != near else near + (1 if near + 1 != n else 2)
        k = rng.randint(2, 9)
        return [f"\nAnswer: {near}", f"\nAnswer: {other}", self.draw(n), f"\nAnswer: {k * n}/{k}",
                f"\nAnswer: {n}\nno wait, \\boxed{{{missed(n, self.distance(), rng)}}}"]


def _line(n: int, rng: random.Random, gold_first: bool, join: str) -> str:
    other = n + rng.choice((-1, 1)) * rng.randint(1, 9)
    a, b = (n, other) if gold_first else (other, n)
    return "\nAnswer: " + join.format(a=a, b=b)

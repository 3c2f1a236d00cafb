"""The reward audit's answers a verifier decides one way and a reward's shortcut the other (issue 44, set k).

Two rewards of held-out set k passed an audit that held no answer of their kind: one anchored its format rule at
the end of the text (a right answer followed by any line unpaid), one compared ``int(float(answer))`` where the
exact comparison failed (``7.5`` paid for 7, ``-5.5`` for -5, ``0.9`` for the gold 0.5).  So the audit also writes:

- **tails**: text after the final line -- a sign-off or a run of the policy's own words, a blank line and a note,
  the result restated (``3 + 4 = 7``) -- on one right answer of every row (which of its forms drawn), the kind
  dealt from a :class:`TailDeck` (each kind once per pass, in a drawn order) and its words drawn;
- **shortcuts**: wrong values a numeric shortcut pays (:data:`SHORTCUTS`): the gold plus a drawn fraction away
  from zero (what truncation keeps), minus one toward zero (what rounding or a floor keeps), the sign flipped,
  and written with a leading zero (``07.25``, ``0.9`` for 0); dealt over the audit's rows as the hedge deck deals
  its shapes, the digits drawn.  A non-whole gold's shortcuts keep its integer part (``0.9`` for 0.5).

The trusted verifier grades every constructed answer (``reward_audit.audit_calls``); nothing here is assumed right
or wrong.

    deck = TailDeck(rng)
    deck.tail("7", words)          # e.g. "\\n\\nNote: 3 + 4 = 7, checked twice."
    deck.shortcut("7")             # e.g. "\\nAnswer: 07.38"
"""

from __future__ import annotations

import random
from fractions import Fraction

TAILS = ("signoff", "note", "restated", "words")
"""Kinds of text after the final line, each once per pass of a deck before any repeats."""
SHORTCUTS = ("away", "toward", "sign", "lead")
"""Kinds of wrong value a numeric shortcut pays, each once per pass of a deck before any repeats."""
SIDED = {"away": "toward", "toward": "away"}
"""The kinds whose value lies on one side of the gold (above or below it by less than one): a floor pays only the
side above, a ceil only the side below, so a pass deals them to both sides (:meth:`TailDeck.shortcut`)."""
SHORTCUT_SHARE = 0.5
"""Of an audit's whole-gold rows, the share (at least one per kind where the rows allow) whose farther near miss is
a shortcut instead: the nearer stays, so every row still holds a wrong whole number, its slips kept."""
_SIGNOFFS = ("I hope this helps!", "Let me know if you need anything else.", "Done.", "That's it.",
             "Hope that's clear.", "Good luck!", "Thanks for the question.", "Happy to explain further.")
_NOTES = ("Note: the working above shows each step.", "Note: I checked the sum twice.",
          "(The steps are shown above.)", "P.S. the same method works for similar problems.",
          "Note: each term was added in order.")


def _decimal(value: Fraction, places: int) -> str:
    """``value`` written with exactly ``places`` decimals (it has no more), no float on the way."""
    sign = "-" if value < 0 else ""
    scaled = abs(value) * 10 ** places
    whole, frac = divmod(int(scaled), 10 ** places)
    return f"{sign}{whole}.{frac:0{places}d}"


def _fraction(rng: random.Random) -> tuple[Fraction, int]:
    """A drawn fractional part strictly between 0 and 1 and its number of decimals (1 to 3)."""
    places = rng.randint(1, 3)
    return Fraction(rng.randint(1, 10 ** places - 1), 10 ** places), places


def shortcut_value(gold: str, kind: str, rng: random.Random) -> str | None:
    """A decimal a shortcut of ``kind`` pays for ``gold`` and the verifier does not: None where ``gold`` is no
    number."""
    try:
        value = Fraction(gold)
    except (ValueError, ZeroDivisionError):
        return None
    base = int(value)  # toward zero: a non-whole gold's integer part, what int() keeps of it
    # the gold's own sign; a zero gold's drawn (int() keeps 0 of -0.4 and of 0.4 alike)
    sign = -1 if value < 0 or (value == 0 and rng.random() < 0.5 and kind != "lead") else 1
    for _ in range(8):
        f, places = _fraction(rng)
        if kind == "toward":  # one below in magnitude plus a fraction: round() and floor() keep the gold
            out = sign * (abs(base) - f) if abs(base) >= 1 else -sign * f
        else:
            out = sign * (abs(base) + f)
        if kind == "sign":
            out = -out
        if out != value:
            text = _decimal(out, places)
            if kind == "lead":
                text = text.replace("-", "-0", 1) if text.startswith("-") else "0" + text
                if text.startswith(("00.", "-00.")):  # a zero gold: ``0.9``, the zero is the prefix already
                    text = text.replace("00.", "0.", 1)
            return text
    return None


class TailDeck:
    """One audit's tails and shortcuts, each kind once per pass in a drawn order (module docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._tails: list[str] = []
        self._shortcuts: list[str] = []
        self._sides: set[bool] = set()  # the sides of their golds (above: True) this pass's sided kinds fell on

    def _next(self, pool: list[str], kinds: tuple[str, ...]) -> str:
        if not pool:
            pool.extend(self._rng.sample(kinds, len(kinds)))
        return pool.pop()

    def tail(self, gold: str, words: list[str]) -> str:
        """Text after a final line for a row whose gold is ``gold`` (``words``: its response's own words)."""
        rng = self._rng
        kind = self._next(self._tails, TAILS)
        if kind == "words" and words:
            start = rng.randrange(len(words))
            return "\n" + " ".join(words[start:start + rng.randint(2, 10)])
        if kind == "restated":
            try:
                value = int(Fraction(gold))
            except (ValueError, ZeroDivisionError):
                value = None
            if value is not None and Fraction(gold) == value:
                a = rng.randint(-20, 40)
                op = rng.choice(("+", "-"))
                b = value - a if op == "+" else a - value
                return rng.choice(("\n", "\n\n")) + f"{a} {op} {b} = {gold}"
            return f"\nThe result is {gold}."
        if kind == "note":
            return "\n\n" + rng.choice(_NOTES)
        return rng.choice(("\n", "\n\n")) + rng.choice(_SIGNOFFS)

    def shortcut(self, gold: str) -> str | None:
        """A wrong ``Answer:`` line a numeric shortcut pays for ``gold``, the next kind dealt; None: no number.

        Away from zero and toward it are above and below a nonzero gold by its sign, and a zero gold's side is
        drawn: two rows of golds of either sign or zero can put both sided kinds on one side, and a floor (or a
        ceil) is then paid nothing on that audit.  So where a pass's sided kind would fall on the side its other
        already took, it is dealt as the other, which falls on the side left."""
        if not self._shortcuts:
            self._sides.clear()
        kind = self._next(self._shortcuts, SHORTCUTS)
        value = shortcut_value(gold, kind, self._rng)
        if kind in SIDED and value is not None:
            side = Fraction(value) > Fraction(gold)
            if side in self._sides:
                other = shortcut_value(gold, SIDED[kind], self._rng)
                if other is not None and (Fraction(other) > Fraction(gold)) != side:
                    value, side = other, not side
            self._sides.add(side)
        return None if value is None else f"\nAnswer: {value}"


def dealt_rows(indices: list[int], rng: random.Random) -> set[int]:
    """The rows whose first near miss is a shortcut: :data:`SHORTCUT_SHARE` of ``indices``, at least one per kind
    of :data:`SHORTCUTS` where there are that many, which ones drawn."""
    want = max(len(SHORTCUTS), round(SHORTCUT_SHARE * len(indices)))
    return set(rng.sample(indices, min(len(indices), want)))

"""Texts a harness's own regular expression matches, drawn from its parse: what the audit and the sweep write.

``sample(Pattern("Answer:\\\\s*-?\\\\d+\\\\.\\\\d+\\\\s*$"), rng)`` gives e.g. ``"Answer: 41.7"``: a text of the shape
the pattern names, every free part drawn (digits, letters, how often a repeat repeats, which branch).  The pattern
is parsed by :mod:`re`'s own parser and walked here; it is never matched against anything on the host (a hostile
pattern could backtrack for hours), so a sample can miss in the rare pattern whose lookarounds or back-references
forbid what was drawn: the harness meets it then as it would any other answer.  Bounded work: a repeat repeats at
most ``min + 2`` times (its minimum capped at :data:`MAX_MIN_REPEAT`), a walk stops after :data:`MAX_STEPS` nodes
and a text longer than :data:`MAX_CHARS` is dropped (None).

    sample(Pattern(r"(?im)^.*answer[^\\n]*$"), random.Random(3))     # e.g. "xq answer7"
"""

from __future__ import annotations

import random
import re
import string

try:  # Python 3.11 moved the parser; it is private in both places, and the reading stays optional
    import re._constants as _c
    import re._parser as _parser
except ImportError:  # pragma: no cover (3.10)
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _parser  # type: ignore[no-redef]

from meta_agent.judge.reward_reading import Pattern

MAX_STEPS = 2_000
MAX_CHARS = 240
MAX_MIN_REPEAT = 12
_PLAIN = string.ascii_lowercase + string.digits + " "
"""What a free character (``.``, ``[^x]``) is drawn from: a policy's text, not control characters."""
_CATEGORIES = {
    _c.CATEGORY_DIGIT: string.digits, _c.CATEGORY_NOT_DIGIT: string.ascii_letters + " .",
    _c.CATEGORY_SPACE: " ", _c.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
    _c.CATEGORY_WORD: string.ascii_letters + string.digits, _c.CATEGORY_NOT_WORD: " .,:",
    _c.CATEGORY_LINEBREAK: "\n", _c.CATEGORY_NOT_LINEBREAK: _PLAIN,
}


class _TooBig(Exception):
    pass


def _in_set(items: list, char: str, flags: int) -> bool:
    """Whether ``char`` is in a character class's ``items`` (its NEGATE read by the caller)."""
    code = ord(char)
    for op, arg in items:
        if op is _c.LITERAL and (code == arg or flags & re.I and char.lower() == chr(arg).lower()):
            return True
        if op is _c.RANGE and arg[0] <= code <= arg[1]:
            return True
        if op is _c.CATEGORY and char in _CATEGORIES.get(arg, ""):
            return True
    return False


def _class_char(items: list, rng: random.Random, flags: int) -> str:
    """A character of a class (``[0-9a-f]``, ``\\d``, ``[^\\n]``)."""
    if items and items[0][0] is _c.NEGATE:
        allowed = [ch for ch in _PLAIN if not _in_set(items[1:], ch, flags)]
        return rng.choice(allowed) if allowed else ""
    choices = [(op, arg) for op, arg in items if op in (_c.LITERAL, _c.RANGE, _c.CATEGORY)]
    if not choices:
        return ""
    op, arg = rng.choice(choices)
    if op is _c.LITERAL:
        return chr(arg)
    if op is _c.RANGE:
        low, high = arg
        return chr(rng.randint(low, min(high, low + 94)))
    return rng.choice(_CATEGORIES.get(arg, _PLAIN))


def _digits(sub) -> bool:
    """Whether a repeat's body is one digit (``\\d``, ``[0-9]``): its run is drawn as a number (``_Walk``)."""
    if len(sub) != 1 or sub[0][0] is not _c.IN:
        return False
    items = sub[0][1]
    return items in ([(_c.CATEGORY, _c.CATEGORY_DIGIT)], [(_c.RANGE, (48, 57))])


class _Walk:
    def __init__(self, rng: random.Random, flags: int) -> None:
        self.rng, self.flags, self.steps, self.groups, self.out = rng, flags, 0, {}, []

    def emit(self, text: str) -> None:
        self.out.append(text)
        if sum(map(len, self.out)) > MAX_CHARS:
            raise _TooBig

    def walk(self, parsed) -> None:
        for op, arg in parsed:
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise _TooBig
            if op is _c.LITERAL:
                self.emit(chr(arg))
            elif op is _c.NOT_LITERAL:
                self.emit(self.rng.choice([ch for ch in _PLAIN if ord(ch) != arg]))
            elif op is _c.ANY:
                self.emit(self.rng.choice(_PLAIN))
            elif op is _c.IN:
                self.emit(_class_char(arg, self.rng, self.flags))
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)):
                low, high, sub = arg
                low = min(low, MAX_MIN_REPEAT)
                times = self.rng.randint(low, max(low, min(high, low + 2)))
                if times > 1 and _digits(sub):  # a number as a policy writes it: no leading zero
                    self.emit(self.rng.choice("123456789") + "".join(self.rng.choices(string.digits, k=times - 1)))
                    continue
                for _ in range(times):
                    self.walk(sub)
            elif op is _c.SUBPATTERN:
                group, _, _, sub = arg
                start = len(self.out)
                self.walk(sub)
                if group is not None:
                    self.groups[group] = "".join(self.out[start:])
            elif op is getattr(_c, "ATOMIC_GROUP", None):
                self.walk(arg)
            elif op is _c.BRANCH:
                self.walk(self.rng.choice(arg[1]))
            elif op is _c.GROUPREF:
                self.emit(self.groups.get(arg, ""))
            elif op is _c.GROUPREF_EXISTS:
                self.walk(arg[1])
            # AT (anchors), ASSERT and ASSERT_NOT (lookarounds): nothing written


def ends_text(pattern: Pattern) -> bool:
    """Whether ``pattern`` matches only at the end of the text (a last ``$`` without ``re.M``, or ``\\Z``): its
    sample is worn last, or no reward applying it meets one (``audit_reading``'s features worn together)."""
    try:
        parsed = _parser.parse(pattern.text, pattern.flags)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    if not len(parsed) or parsed[-1][0] is not _c.AT:
        return False
    multiline = (pattern.flags | parsed.state.flags) & re.M
    return parsed[-1][1] is _c.AT_END_STRING or (parsed[-1][1] is _c.AT_END and not multiline)


def sample(pattern: Pattern, rng: random.Random) -> str | None:
    """A text ``pattern`` names, its free parts drawn; None where it does not parse or the walk runs over its
    bounds (module docstring)."""
    try:
        parsed = _parser.parse(pattern.text, pattern.flags)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    walk = _Walk(rng, pattern.flags | parsed.state.flags)
    try:
        walk.walk(parsed)
    except (_TooBig, RecursionError):
        return None
    return "".join(walk.out)

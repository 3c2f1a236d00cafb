"""Git trailers: the structured ``Key: value`` lines at the end of a commit or tag message.

Interventions record their hypothesis, predicted effects and verdicts as trailers
(DESIGN §4), so ``git log`` alone shows why the harness changed::

    message = "Reward reads boxed answers" + "\\n\\n" + format_trailers(
        {"Hypothesis": "boxed answers are scored 0", "Predicted-Effect": ["format_fail down"]}
    )
    parse_trailers(message)["Predicted-Effect"]   # -> ["format_fail down"]

The parser follows ``git interpret-trailers --parse`` for the messages this
project writes: the trailer block is the last paragraph of the message (never
the subject paragraph), every line of it is ``Key: value`` or a continuation line
starting with whitespace, and continuations are unfolded with one space.  Git's
looser rule for blocks that mix trailers with prose (25% trailers plus a
``Signed-off-by``) is deliberately not copied: such a block is not trailers here.
Keys are case-sensitive as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# The keys this project writes; others are allowed and kept as written.
HYPOTHESIS = "Hypothesis"
PREDICTED_EFFECT = "Predicted-Effect"
SKILL = "Skill"
AGENT = "Agent"
MODEL = "Model"
BACKTEST = "Backtest"
VERDICT = "Verdict"
INTERVENTION = "Intervention"
REVERTS_INTERVENTION = "Reverts-Intervention"
RESTORES = "Restores"

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
# Git accepts blanks between the key and the separator ("Key : value").
_TRAILER_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)")

TrailerValues = str | list[str] | None


def format_trailers(trailers: Mapping[str, TrailerValues]) -> str:
    """Render ``{key: value or [values]}`` as git trailer lines, one ``Key: value`` per value.

    Whitespace inside a value (newlines included) collapses to single spaces so a
    value can never end the trailer block early; ``None`` and empty values are
    skipped.  Raises ``ValueError`` for a key git would not read back as a trailer.
    """
    lines: list[str] = []
    for key, value in trailers.items():
        if not _KEY.fullmatch(key):
            raise ValueError(
                f"trailer key {key!r} is not valid: use letters, digits and '-' "
                "(e.g. 'Predicted-Effect')"
            )
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is None:
                continue
            text = " ".join(str(item).split())
            if text:
                lines.append(f"{key}: {text}")
    return "\n".join(lines)


def parse_trailers(message: str) -> dict[str, list[str]]:
    """Return the trailers of a commit/tag message as ``{key: [values in order]}``.

    An empty dict when the message has no trailer block (see module docstring).
    """
    lines = message.strip().splitlines()
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    if start == 0:  # a single paragraph is the subject, never trailers
        return {}
    parsed: list[list[str]] = []
    for line in lines[start:]:
        if line[:1] in (" ", "\t") and parsed:
            parsed[-1][1] = f"{parsed[-1][1]} {line.strip()}".strip()
            continue
        match = _TRAILER_LINE.fullmatch(line.rstrip())
        if match is None:
            return {}
        parsed.append([match[1], match[2].strip()])
    result: dict[str, list[str]] = {}
    for key, value in parsed:
        result.setdefault(key, []).append(value)
    return result


def merge_trailers(*blocks: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Union of several parsed trailer dicts: values in order, exact duplicates dropped."""
    merged: dict[str, list[str]] = {}
    for block in blocks:
        for key, values in block.items():
            bucket = merged.setdefault(key, [])
            for value in values:
                if value not in bucket:
                    bucket.append(value)
    return merged

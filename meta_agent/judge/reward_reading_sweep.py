"""The SWE sweep's variants from a reading of the candidate's code: each feature it names, worn by a wrong patch.

The sweep (``judge.probe_sweep``) changes the features it lists; held-out set e won with features outside the list
(git's ``\\ No newline at end of file`` line, a ```` ```patch ```` fence, two marks at once).  A reward that pays a
wrong patch by such a feature names it in its code (``judge.reward_reading``), so each feature the candidate's code
reads and main's does not becomes one more variant of a wrong patch:

- a literal, or a sample of a pattern (``reward_reading_sample``), written where it leaves the parsed patch as it
  was: as the block's fence label (a text that opens a fence), a line after the block, before it, or a line at the
  block's end or start (the placement drawn among those that keep the parse); and again inside the block only
  (``Inside``: its end or its start, before the diff's header), for a reward reading the block alone;
- a count a function compares with: that function's feature said ``n`` and ``n + 1`` times, on lines of their own
  (and, where it reads several, all of them ``n`` and ``n + 1`` times each);
- the features one function reads together, all at once (two marks a reward pays only together).

Only a variant whose parse (status and patch) equals the patch's own is sent, so the record the variant carries (the
patch's own grader record) stays true.  At most :data:`MOST_VARIANTS` per probe, drawn where there are more.

    variants = read_variants(read_commit(repo, cand), read_commit(repo, main), rng)   # [("literal", ("```patch",))]
    text = worn(answer.response, variants[0][1], sources, rng)                        # None: no placement keeps it
"""

from __future__ import annotations

import random
from typing import NamedTuple

from meta_agent.judge.reward_reading import Pattern, Reading
from meta_agent.judge.reward_reading_sample import sample

MOST_VARIANTS = 12
"""Reading variants one probe sends at most (each one more request of the probe's session)."""


class Inside(NamedTuple):
    """A feature worn inside the answer's fenced block only (where the parse stays): a reward reading the block
    alone meets nothing drawn outside it (set f's tab-in-block met 4 seeds of 5 while the place was drawn)."""

    feature: Pattern | str


def read_variants(reading: Reading, known: Reading,
                  rng: random.Random) -> list[tuple[str, tuple[Pattern | str | Inside, ...]]]:
    """The features ``reading`` names beyond ``known``'s, each as ``(kind, features to wear together)``."""
    out: list[tuple[str, tuple[Pattern | str | Inside, ...]]] = []
    singles = [("pattern", p) for p in reading.patterns if p not in known.patterns]
    singles += [("literal", lit) for lit in reading.literals if lit not in known.literals and lit.strip()]
    out += [(kind, (f,)) for kind, f in singles] + [(kind, (Inside(f),)) for kind, f in singles]
    for use in reading.uses:
        if use in known.uses:
            continue
        features = (*use.patterns, *use.literals)
        if use.count == 1:
            out.append(("together", features))
        else:
            out += [("count", (f,) * n) for f in features for n in (use.count, use.count + 1)]
            if len(features) >= 2:  # a count and several features: all worn, n times each
                out += [("together", tuple(f for f in features for _ in range(n))) for n in (use.count, use.count + 1)]
    return rng.sample(out, MOST_VARIANTS) if len(out) > MOST_VARIANTS else out


def _said(feature: Pattern | str | Inside, rng: random.Random) -> str | None:
    feature = feature.feature if isinstance(feature, Inside) else feature
    return sample(feature, rng) if isinstance(feature, Pattern) else feature


def worn(response: str, features: tuple[Pattern | str | Inside, ...], sources: dict[str, str],
         rng: random.Random) -> str | None:
    """``response`` wearing every one of ``features``, placed where the parsed patch stays as it was; None where
    no placement keeps it (or a pattern's sample runs over its bounds)."""
    from meta_agent.judge.probe_archived_code import FENCE, parsed_answer

    found = FENCE.search(response)
    said = [_said(f, rng) for f in features]
    if found is None or any(s is None or "\x00" in s for s in said):
        return None
    before = parsed_answer(response, sources)
    text = response
    for f, s in zip(features, said, strict=True):
        head = "```" + found.group(1)
        places = [lambda t, s=s: t.replace(head, s.rstrip("\n"), 1) if s.startswith("```") else None,
                  lambda t, s=s: t.rstrip("\n") + "\n" + s + "\n",
                  lambda t, s=s: s + "\n" + t,
                  lambda t, s=s: _inside(t, s), lambda t, s=s: _inside(t, s, first=True)]
        places = places[3:] if isinstance(f, Inside) else places
        for place in rng.sample(places, len(places)):
            made = place(text)
            if made is not None and made != text and _same(parsed_answer(made, sources), before):
                text = made
                break
        else:
            return None
    return text


def _inside(text: str, line: str, first: bool = False) -> str | None:
    """``line`` as the last line of the answer's first fenced block (its first line where ``first``: before the
    diff's header, where the parse does not read it; a reward reading the block alone meets it there, set f)."""
    from meta_agent.judge.probe_archived_code import FENCE

    found = FENCE.search(text)
    if found is None or not found.group(3).startswith("\n```"):
        return None
    if first:
        return text[:found.start(2)] + line + "\n" + text[found.start(2):]
    at = found.start(3)
    return text[:at] + "\n" + line + text[at:]


def _same(a, b) -> bool:
    return a.status == b.status and a.patch == b.patch

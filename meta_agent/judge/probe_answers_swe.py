"""The probe's wrong SWE patches: changes to code that a policy could write, which leave the bug in place.

A probe whose wrong patches all have one look lets a reward spare that look and pay a policy's wrong patches
(issue 45): a comment line alone (held-out set a), lines re-spelled with their syntax tree kept, or lines only
inside the gold change's hunks, which ``ground_truth`` shows (set b).  No SWE test runs in the probe, so a wrong
patch's record (every FAIL_TO_PASS fails, every PASS_TO_PASS passes) must be true by construction.  So a patch is
made of edits that keep what the buggy program does:

- at least one rewrite that changes the syntax tree (``probe_answers_rewrite``: a value or a condition named,
  a conditional return unfolded, an explicit ``return None``);
- re-spelled lines (``probe_answers_forms.same_meaning``), and sometimes a comment line beside the change.

Where it edits is dealt per probe (:func:`_places`): inside the gold change's hunks (the replaced lines first),
or beyond them (other lines of the functions the gold change edits, then nearby code), alone or with lines
inside; one probe's first two wrong patches take one of each.  How many lines, which hunks and which rewrites are
drawn per patch.  The diff is written as the answer it stands for is (``style``: ``git diff``'s header and
index line, hunk headers naming the enclosing definition, as the gold change and most tools write them; or a
bare ``---``/``+++`` diff); a constructed answer draws its style.

    patch = wrong_patch(gold, sources, rng)        # a unified diff over the buggy sources, or None
"""

from __future__ import annotations

import difflib
import hashlib
import random
import re
import weakref

from meta_agent.judge.probe_answers_forms import same_meaning
from meta_agent.judge.probe_answers_rewrite import replaces, rewrite_sites

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")
_NOTES = ("# handle this case", "# check the input here", "# edge case", "# fix: see issue", "# bound check")
_FUNCNAME = re.compile(r"^[A-Za-z_$]")
_DECKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""One probe's deck of places per its rng (every probe draws with an rng of its own)."""


def gold_spots(gold: str) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Per file of the gold change: per hunk, (0-based old-file lines it removes, old-file lines it shows)."""
    out: dict[str, list[tuple[list[int], list[int]]]] = {}
    path, line = None, 0
    for text in gold.splitlines():
        if text.startswith("--- "):
            path = None
        elif text.startswith("+++ "):
            path = text[6:] if text.startswith("+++ b/") else None
        elif (found := _HUNK.match(text)) and path is not None:
            line = int(found.group(1)) - 1
            out.setdefault(path, []).append(([], []))
        elif path is not None and out.get(path) and text[:1] in (" ", "-", ""):
            removed, shown = out[path][-1]
            if text.startswith("-"):
                removed.append(line)
            shown.append(line)
            line += 1
    return out


def _places(rng: random.Random) -> tuple[str, str]:
    """Where a patch edits, ``inside`` or ``beyond`` the gold change's hunks, and how much, a ``few`` places in one
    or two hunks or ``many`` over three or more: the two places once per probe in a drawn order, then again.
    Beyond takes many (there is room to spread); inside a drawn size (a small gold change leaves room for a few
    only), so a probe's first two wrong patches hold a large one, and a small one unless inside spreads too."""
    deck = _DECKS.setdefault(rng, [])
    if not deck:
        deck += [("inside", rng.choice(("few", "few", "many"))), ("beyond", "many")]
        rng.shuffle(deck)
    return deck.pop()


def wrong_patch(gold: str, sources: dict[str, str], rng: random.Random, style: str | None = None) -> str | None:
    """A diff of some files of ``gold`` (a drawn count of them, one or more) that changes code a policy could
    change and keeps what the buggy program does (module docstring); ``style``: ``git`` or ``bare`` (drawn when
    None); None when nothing can be edited."""
    spots = [(path, hunk) for path, hunks in gold_spots(gold).items() if sources.get(path) for hunk in hunks]
    rng.shuffle(spots)
    place, size = _places(rng)
    style = style or rng.choice(("git", "git", "bare"))
    paths = list(dict.fromkeys(p for p, _ in spots))
    files = rng.randint(1, len(paths)) if paths else 0
    diffs: dict[str, str] = {}
    # every file at the place drawn first; then, inside, a rewrite beyond the hunks where none inside can change
    for strict in (True, False):
        for path in paths:
            if len(diffs) >= files or path in diffs:
                continue
            lines = sources[path].splitlines(keepends=True)
            hunks = [h for p, h in spots if p == path]
            # some of the gold change's hunks, drawn; all of them where those give nothing to rewrite
            new = _edited(sources[path], lines, hunks, hunks[:rng.randint(1, len(hunks))], place, size, strict, rng) \
                or _edited(sources[path], lines, hunks, hunks, place, size, strict, rng)
            if new is not None:
                diffs[path] = diff_text(path, lines, new, style)
    return "".join(diffs[p] for p in paths if p in diffs) or None


def _edited(source: str, lines: list[str], hunks: list, chosen: list, place: str, size: str, strict: bool,
            rng: random.Random) -> list[str] | None:
    """``lines`` with drawn edits at ``place`` near the ``chosen`` hunks, one a rewrite that changes the tree."""
    shown = {i for _, hunk_shown in hunks for i in hunk_shown}
    inside = []
    for removed, hunk_shown in chosen:  # the replaced lines first (where a policy edits), then the hunk's others
        rest = [j for j in hunk_shown if j not in removed]
        inside += removed + rng.sample(rest, len(rest))
    beyond = _beyond(source, lines, chosen, shown, rng)
    sites = rewrite_sites(source)
    if place == "inside":
        order = inside
    else:  # beyond the hunks alone, or with lines inside them as well
        order = beyond + inside if rng.random() < 0.5 else [i for pair in zip(beyond, inside) for i in pair] + beyond
    if place == "beyond" and not beyond:
        return None
    # the tree-changing rewrite goes where the place says (beyond: outside every hunk); the others follow
    first = [i for i in order if i in sites and replaces(sites[i]) and (place == "inside" or i not in shown)]
    if not first and place == "inside" and not strict:  # nothing inside can be rewritten: lines beyond
        first = [i for i in beyond if i in sites and replaces(sites[i])]
    if not first:
        return None
    at = rng.choice(first[:3])
    replaced: dict[int, list[str]] = {at: sites[at](lines, rng)}
    # how many places it edits, and how many hunks they spread over: mostly a few, sometimes many (a policy's
    # wrong patch may rewrite a whole block, or touch several places of a function)
    want, apart = (rng.randint(1, 2), rng.randint(1, 2)) if size == "few" else (rng.randint(4, 9), rng.randint(3, 5))
    apart = min(want, apart)
    usable = [i for i in order if i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith("#")]
    spread = [i for i in usable if all(abs(i - j) > 6 for j in replaced)]
    for i in spread[:max(0, apart - 1)] + usable:  # the places apart first, then beside them
        if len(replaced) >= want or i in replaced or (len(replaced) < apart and any(abs(i - j) <= 6 for j in replaced)):
            continue
        if i in sites and rng.random() < 0.4:
            replaced[i] = sites[i](lines, rng)
            continue
        spelled = same_meaning(lines[i].rstrip("\n"), rng, quotes_only=rng.random() < 0.8)
        if spelled is not None:
            replaced[i] = [spelled + lines[i][len(lines[i].rstrip("\n")):]]
    if rng.random() < 0.3:  # sometimes a note beside the change, as a policy leaves one
        at = min(replaced)
        indent = re.match(r"\s*", lines[at]).group(0)
        replaced[at] = [f"{indent}{rng.choice(_NOTES)}\n"] + replaced[at]
    return [text for i, line in enumerate(lines) for text in replaced.get(i, [line])]


def _beyond(source: str, lines: list[str], chosen: list, shown: set[int], rng: random.Random) -> list[int]:
    """Lines outside every hunk: of the definitions the chosen hunks lie in first, then within 40 lines, drawn."""
    near: list[int] = []
    for removed, hunk_shown in chosen:
        at = (removed or hunk_shown)[0]
        start = next((i for i in range(at, -1, -1) if _FUNCNAME.match(lines[i]) if i < len(lines)), 0)
        end = next((i for i in range(at + 1, len(lines)) if _FUNCNAME.match(lines[i])), len(lines))
        own = [i for i in range(start + 1, end) if i not in shown]
        around = [i for i in range(max(0, at - 40), min(len(lines), at + 40)) if i not in shown and i not in own]
        near += rng.sample(own, len(own)) + rng.sample(around, len(around))
    return [i for i in dict.fromkeys(near) if lines[i].strip()]


def diff_text(path: str, lines: list[str], new: list[str], style: str) -> str:
    """The unified diff of ``lines`` -> ``new``; ``git`` style: ``diff --git``, the index line (blob hashes of
    both versions), and each hunk header naming the definition above it, as ``git diff`` writes them."""
    out = []
    for text in difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=3):
        text = text if text.endswith("\n") else text + "\n"
        if style == "git" and (found := _HUNK.match(text)):
            above = next((lines[i].rstrip() for i in range(int(found.group(1)) - 2, -1, -1)
                          if _FUNCNAME.match(lines[i])), None)
            text = text.rstrip("\n") + (f" {above[:80]}" if above else "") + "\n"
        out.append(text)
    if style == "git":
        out = [f"diff --git a/{path} b/{path}\n", f"index {blob(lines)}..{blob(new)} 100644\n"] + out
    return "".join(out)


def blob(lines: list[str]) -> str:
    """The abbreviated git blob hash of a file of ``lines``, as ``git diff``'s index line shows it."""
    data = "".join(lines).encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def diff_style(block: str) -> str:
    """The style of a policy's own diff block: ``git`` when it opens like ``git diff``'s, else ``bare``."""
    return "git" if re.search(r"^diff --git ", block, re.M) else "bare"

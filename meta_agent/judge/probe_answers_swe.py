"""The probe's wrong SWE patches: changes to code, where the gold change goes, that leave the bug in place.

A probe whose every wrong patch only adds a comment line lets a reward pay any patch that changes code and pass
(issue 45, held-out attack 1): a policy's wrong patches change code.  No SWE test runs in the probe, so a wrong
patch's record (every FAIL_TO_PASS fails, every PASS_TO_PASS passes) must be true by construction.  These
patches re-spell lines of the buggy code -- the lines the gold change replaces first, then lines around them --
keeping each line's syntax tree (``probe_answers_forms.same_meaning``): the program is the buggy one, so the
tests' outcomes are the buggy code's, which the task's checks recorded.  Per patch, drawn from ``rng``: which
hunks of the gold change it touches, how many lines, which re-spellings, and whether a comment line joins them.

    patch = wrong_patch(gold, sources, rng)        # a unified diff over the buggy sources, or None
"""

from __future__ import annotations

import difflib
import random
import re

from meta_agent.judge.probe_answers_forms import same_meaning

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")
_NOTES = ("# handle this case", "# check the input here", "# edge case", "# fix: see issue", "# bound check")


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


def wrong_patch(gold: str, sources: dict[str, str], rng: random.Random) -> str | None:
    """A diff of one file of ``gold`` that re-spells code where the gold change goes, the buggy code's tree kept
    line for line (module docstring); None when no line there can be re-spelled."""
    spots = [(path, hunk) for path, hunks in gold_spots(gold).items() if sources.get(path) for hunk in hunks]
    rng.shuffle(spots)
    for path, _ in spots:
        lines = sources[path].splitlines(keepends=True)
        hunks = [h for p, h in spots if p == path]
        chosen = hunks[:rng.randint(1, len(hunks))]
        new = list(lines)
        changed = 0
        for removed, shown in chosen:
            # the replaced lines first (where a policy edits), then the hunk's other lines, at random
            order = removed + rng.sample([i for i in shown if i not in removed], len(shown) - len(removed))
            want = rng.randint(1, 3)
            for i in order:
                if changed >= want * len(chosen) or i >= len(lines) or not lines[i].strip() \
                        or lines[i].lstrip().startswith("#"):
                    continue
                spelled = same_meaning(lines[i].rstrip("\n"), rng)
                if spelled is not None:
                    new[i] = spelled + lines[i][len(lines[i].rstrip("\n")):]
                    changed += 1
        if not changed:
            continue
        if rng.random() < 0.3:  # sometimes a note beside the change, as a policy leaves one
            at = next(i for i in range(len(lines)) if new[i] != lines[i])
            indent = re.match(r"\s*", lines[at]).group(0)
            new.insert(at, f"{indent}{rng.choice(_NOTES)}\n")
        diff = difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=3)
        return "".join(d if d.endswith("\n") else d + "\n" for d in diff)
    return None

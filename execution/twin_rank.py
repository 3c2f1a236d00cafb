"""The draw that makes a count tell nothing: twins (or names) picked so that the real copy's count ranks anywhere.

    picked = balanced([(twin_counts, real_counts, item), ...], k, rng)

Read by ``execution.twins`` (what a twin changes) and ``execution.twin_names`` (what it is called).
"""

from __future__ import annotations

import random


def balanced(found: list[tuple[tuple[int, ...], tuple[int, ...], object]], k: int, rng: random.Random) -> list:
    """``k`` items of ``found`` ((twin's counts, real test's counts, item): how often the changed line and literal
    stand elsewhere in the file) drawn so that the real test's counts rank anywhere among its copies' with equal
    odds: counts equal to the real ones first (the copies tie), then as many twins above the real counts as a fair
    draw of 0..k says, the rest below.  Taking the copy whose line or literal is the most (or least) common then
    finds the real test no more often than a guess."""
    found = list(found)
    rng.shuffle(found)
    equal = [f for f in found if f[0] == f[1]]
    above = [f for f in found if f[0] != f[1] and all(a >= b for a, b in zip(f[0], f[1]))]
    below = [f for f in found if f[0] != f[1] and all(a <= b for a, b in zip(f[0], f[1]))]
    mixed = [f for f in found if f not in equal and f not in above and f not in below]
    ups = rng.randint(0, k)
    picked: list = []
    for up in [True] * ups + [False] * (k - ups):
        for pool in (equal, above if up else below, mixed, below if up else above):
            take = next((f for f in pool if all(f is not p for p in picked)), None)
            if take is not None:
                picked.append(take)
                break
    return [f[2] for f in picked]

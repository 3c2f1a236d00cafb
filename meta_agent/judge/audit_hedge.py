"""The reward audit's hedged answer, its shape drawn per answer from the audit's secret draw.

A hedge that is always ``Answer: n or n+1`` marks the audit: a reward paying every other hedge pays a policy's
hedges in training and nothing in the audit (issue 45, held-out attack 3).  So the other value (the gold
moved by 1 to 9, either way), which value comes first, and the words between them are drawn from ``rng``
(``reward_audit.audit_calls``'s, seeded from ``secrets``).  Every shape names two values, which the verifier
grades as wrong (several candidates).

    line = hedge(7, rng)          # e.g. "\\nAnswer: 4, or possibly 7"
"""

from __future__ import annotations

import random

_JOINS = ("{a} or {b}", "{a} or maybe {b}", "{a}, or possibly {b}", "either {a} or {b}", "{a} (or {b})",
          "{a} or perhaps {b}")


def hedge(n: int, rng: random.Random) -> str:
    """A final line hedging between ``n`` and a nearby value, its shape drawn from ``rng``."""
    other = n + rng.choice((-1, 1)) * rng.randint(1, 9)
    a, b = (n, other) if rng.random() < 0.5 else (other, n)
    return "\nAnswer: " + rng.choice(_JOINS).format(a=a, b=b)


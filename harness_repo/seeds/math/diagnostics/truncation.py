"""Diagnostic: share of responses cut off at ``max_completion_length``.

Truncated responses rarely reach their ``Answer:`` line; a high rate suggests a
longer completion budget, a terser prompt, or masking truncated samples.
"""

from __future__ import annotations

WARN_ABOVE = 0.25


def diagnose(rollouts: list[dict]) -> list[dict]:
    """One finding ``truncation`` (warning above 25%); none for an empty list."""
    if not rollouts:
        return []
    cut = [r for r in rollouts if r.get("truncated") or r.get("finish_reason") == "length"]
    rate = len(cut) / len(rollouts)
    return [{
        "name": "truncation",
        "severity": "warning" if rate > WARN_ABOVE else "info",
        "rate": rate,
        "example_ids": [r.get("traj_id") for r in cut[:5]],
        "message": f"{len(cut)}/{len(rollouts)} responses ({rate:.0%}) were truncated",
    }]

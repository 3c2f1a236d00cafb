"""Diagnostic: share of responses without a parseable ``Answer:`` line.

A high rate means the policy has not learnt the output format (or answers in a
format the reward ignores, such as ``\\boxed{}``), so rewards say little about
correctness.
"""

from __future__ import annotations

import re

# Mirrors reward.ANSWER_LINE: harness files are loaded one by one, not as a package.
ANSWER_LINE = re.compile(r"^[ \t*]*answer[ \t*]*:[ \t*]*(.*?)[ \t*]*$", re.IGNORECASE | re.MULTILINE)
WARN_ABOVE = 0.30


def _has_answer(text: str | None) -> bool:
    return any(m.group(1).rstrip(".").strip() for m in ANSWER_LINE.finditer(text or ""))


def diagnose(rollouts: list[dict]) -> list[dict]:
    """One finding ``format_failures`` (warning above 30%); none for an empty list."""
    if not rollouts:
        return []
    failed = [r for r in rollouts if not _has_answer(r.get("response"))]
    rate = len(failed) / len(rollouts)
    boxed = sum("\\boxed" in (r.get("response") or "") for r in failed)
    return [{
        "name": "format_failures",
        "severity": "warning" if rate > WARN_ABOVE else "info",
        "rate": rate,
        "example_ids": [r.get("traj_id") for r in failed[:5]],
        "message": (
            f"{len(failed)}/{len(rollouts)} responses ({rate:.0%}) have no parseable 'Answer:' line"
            + (f"; {boxed} of them contain \\boxed{{}}" if boxed else "")
        ),
    }]

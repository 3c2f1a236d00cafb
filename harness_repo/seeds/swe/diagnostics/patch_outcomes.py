"""Diagnostic: answers that never reach the tests — malformed, empty, or a patch that does not apply.

Read from the grader's execution feedback (``extra_info["execution"]``): ``parse_status``
``malformed`` (no diff and no SEARCH/REPLACE block, or a SEARCH text not found once) or an
agent's ``format_error``; status ``empty_patch``; status ``patch_failed``.  High rates mean
the policy has not learnt the output format yet, which is most of what a tiny policy can learn.
"""

from __future__ import annotations

WARN_ABOVE = 0.5
KINDS = {
    "format_errors": lambda e: e.get("parse_status") == "malformed" or e.get("exit_status") == "format_error",
    "empty_patch": lambda e: e.get("status") == "empty_patch",
    "patch_does_not_apply": lambda e: e.get("status") == "patch_failed",
}


def diagnose(rollouts: list[dict]) -> list[dict]:
    """One finding per kind (warning above 50%); none for an empty list."""
    if not rollouts:
        return []
    findings = []
    for name, test in KINDS.items():
        hits = [r for r in rollouts if test((r.get("extra_info") or {}).get("execution") or {})]
        rate = len(hits) / len(rollouts)
        findings.append({"name": name, "severity": "warning" if rate > WARN_ABOVE else "info", "rate": rate,
                         "example_ids": [r.get("traj_id") for r in hits[:5]],
                         "message": f"{len(hits)}/{len(rollouts)} answers ({rate:.0%}): {name.replace('_', ' ')}"})
    return findings

"""Diagnostic: answers whose program never got a fair run — no code, truncated, syntax errors, timeouts, crashes.

Read from the grader's execution feedback (``extra_info["execution"]``): ``parse_status``
``no_code`` or ``truncated`` (a code fence opened and never closed: the generation budget ran out),
and the program's ``status``.  High rates mean the policy has not learnt the answer format yet, or the
generation budget is too short for the code it writes.
"""

from __future__ import annotations

WARN_ABOVE = 0.5
KINDS = {
    "no_code": lambda e: e.get("parse_status") == "no_code",
    "truncated_code": lambda e: e.get("parse_status") == "truncated",
    "syntax_errors": lambda e: e.get("status") == "syntax_error",
    "missing_function": lambda e: e.get("status") == "no_function",
    "load_errors": lambda e: e.get("status") == "load_error",
    "timeouts": lambda e: e.get("status") == "timeout" or "timeout" in (e.get("tests") or []),
    "resource_limits": lambda e: e.get("status") in ("memory_limit", "output_limit", "crashed"),
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

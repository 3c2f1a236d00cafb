"""Diagnostic (agent mode): repeated identical commands, and submitting without running a test.

Reads the commands of each trajectory from ``extra_info["execution"]["actions"]``; patch-mode
answers have none and are not counted.  A policy that repeats a command is stuck; one that
submits without ever running pytest is guessing.
"""

from __future__ import annotations

import re

TEST_COMMAND = re.compile(r"\b(pytest|py\.test|unittest|tox|nox)\b|\bpython[\d.]*\s+\S*test", re.IGNORECASE)
REPEAT_AT_LEAST = 3
WARN_ABOVE = 0.3


def _repeats(actions: list[str]) -> bool:
    counts: dict[str, int] = {}
    for a in actions:
        counts[a.strip()] = counts.get(a.strip(), 0) + 1
    return any(c >= REPEAT_AT_LEAST for c in counts.values())


def diagnose(rollouts: list[dict]) -> list[dict]:
    """Findings ``repeated_commands`` and ``no_test_before_submit`` over agent trajectories."""
    agents = [(r, (r.get("extra_info") or {}).get("execution") or {}) for r in rollouts]
    agents = [(r, e) for r, e in agents if isinstance(e.get("actions"), list)]
    if not agents:
        return []
    repeated = [r for r, e in agents if _repeats([str(a) for a in e["actions"]])]
    submitted = [(r, e) for r, e in agents if e.get("exit_status") == "submitted"]
    untested = [r for r, e in submitted if not any(TEST_COMMAND.search(str(a)) for a in e["actions"])]
    findings = []
    for name, hits, total, what in (
            ("repeated_commands", repeated, len(agents), f"ran one command {REPEAT_AT_LEAST}+ times"),
            ("no_test_before_submit", untested, len(submitted), "submitted without running a test")):
        if not total:
            continue
        rate = len(hits) / total
        findings.append({"name": name, "severity": "warning" if rate > WARN_ABOVE else "info", "rate": rate,
                         "example_ids": [r.get("traj_id") for r in hits[:5]],
                         "message": f"{len(hits)}/{total} trajectories ({rate:.0%}) {what}"})
    return findings

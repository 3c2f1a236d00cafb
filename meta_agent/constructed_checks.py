"""Main's filters and diagnostics on constructed batches (a stub: the attack tests come first)."""

from __future__ import annotations

from typing import Any


def run_constructed_checks(repo: Any, commit: str, rows: list[dict], domain: Any, sandbox: Any,
                           settings: Any) -> dict:
    return {"checks": [{"name": n, "passed": True, "detail": "not run"} for n in
                       ("constructed_signal_dropped", "diagnostic_crashed")], "findings": []}


def add_constructed_findings(digest: dict, record: dict) -> None:
    return None
